"""The server side of SASL without sockets: the session's states, PLAIN and SCRAM exchanges (SCRAM against
RFC 7677's example and against kbroker's own client), JAAS entries and the listener settings."""

import pytest

from kbroker.broker.configuration.config import BrokerConfig, ConfigError
from kbroker.broker.security import sasl as sasl_module
from kbroker.broker.security.listeners import inter_broker_sasl, listener_security
from kbroker.broker.security.sasl import SaslFailure, SaslSession, State
from kbroker.client.jaas import JaasError, parse_jaas
from kbroker.client.properties import read_properties
from kbroker.client.sasl import SaslCredentials, _ScramClient
from kbroker.protocol import scram
from kbroker.protocol.errors import ErrorCode
from tests.unit.protocol.test_scram import CLIENT_FIRST_BARE, PROOF, SALT, SERVER_FIRST, SERVER_SIGNATURE, WITHOUT_PROOF

API_VERSIONS, METADATA, HANDSHAKE, AUTHENTICATE = 18, 3, 17, 36
RFC_USER = scram.ScramCredential.from_password("SCRAM-SHA-256", "pencil", SALT, 4096)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def session(reauth_ms: int = 0, clock=None) -> SaslSession:
    users = {("user", "SCRAM-SHA-256"): RFC_USER}
    return SaslSession(["PLAIN", "SCRAM-SHA-256"], {"admin": "admin-secret"},
                       lambda user, mechanism: users.get((user, mechanism)), reauth_ms, clock or Clock())


def test_only_api_versions_and_the_exchange_are_admitted_before_authentication():
    s = session()
    assert s.admits(API_VERSIONS) and s.admits(HANDSHAKE) and not s.admits(METADATA) and not s.admits(AUTHENTICATE)
    assert s.handshake("PLAIN", 1) == ErrorCode.NONE
    assert s.admits(AUTHENTICATE) and not s.admits(API_VERSIONS) and not s.admits(METADATA)
    assert s.authenticate(b"\0admin\0admin-secret") == b""
    assert s.state is State.AUTHENTICATED and s.principal == "User:admin" and s.admits(METADATA)
    assert s.session_lifetime_ms == 0
    # No session lifetime: a handshake on the authenticated connection is refused and changes nothing.
    assert s.handshake("PLAIN", 1) == ErrorCode.ILLEGAL_SASL_STATE and s.state is State.AUTHENTICATED


def test_a_second_handshake_during_the_exchange_is_refused_and_fails_the_session():
    s = session()
    s.handshake("PLAIN", 1)
    assert s.admits(HANDSHAKE)   # (answered, then the connection closes)
    assert s.handshake("PLAIN", 1) == ErrorCode.ILLEGAL_SASL_STATE and s.state is State.FAILED


@pytest.mark.parametrize("token, message", [
    (b"\0admin\0wrong", "Invalid username or password"),
    (b"\0nobody\0admin-secret", "Invalid username or password"),
    (b"admin\0admin", "expected 3 tokens"),
    (b"other\0admin\0admin-secret", "authorization id"),
    (b"\0\0x", "username not specified"),
])
def test_plain_failures_fail_the_session(token, message):
    s = session()
    s.handshake("PLAIN", 1)
    with pytest.raises(SaslFailure, match=message) as failure:
        s.authenticate(token)
    assert failure.value.error == ErrorCode.SASL_AUTHENTICATION_FAILED and s.state is State.FAILED


def test_an_unknown_mechanism_fails_the_session():
    s = session()
    assert s.handshake("GSSAPI", 1) == ErrorCode.UNSUPPORTED_SASL_MECHANISM and s.state is State.FAILED


def test_the_scram_server_answers_rfc_7677s_example(monkeypatch):
    monkeypatch.setattr(sasl_module.secrets, "token_urlsafe", lambda _n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    s = session()
    s.handshake("SCRAM-SHA-256", 1)
    assert s.authenticate(("n,," + CLIENT_FIRST_BARE).encode()).decode() == SERVER_FIRST
    assert s.authenticate(f"{WITHOUT_PROOF},p={PROOF}".encode()).decode() == "v=" + SERVER_SIGNATURE
    assert s.principal == "User:user"


@pytest.mark.parametrize("password, works", [("pencil", True), ("crayon", False)])
def test_kbrokers_scram_client_against_the_server(password, works):
    s = session()
    s.handshake("SCRAM-SHA-256", 1)
    client = _ScramClient(SaslCredentials("SCRAM-SHA-256", "user", password))
    final = client.final(s.authenticate(client.first()))
    if works:
        client.check(s.authenticate(final))
        assert s.state is State.AUTHENTICATED
    else:
        with pytest.raises(SaslFailure):
            s.authenticate(final)


@pytest.mark.parametrize("first", [b"p=tls-unique,,n=user,r=abc", b"n,,n=user", b"n,,r=abc", b"n,a=other,n=user,r=x",
                                   b"n,,n=user,r=abc,tokenauth=true", b"\xff"])
def test_scram_refuses_bad_first_messages(first):
    s = session()
    s.handshake("SCRAM-SHA-256", 1)
    with pytest.raises(SaslFailure):
        s.authenticate(first)
    assert s.state is State.FAILED


def test_sessions_expire_and_re_authenticate_as_the_same_principal_only():
    clock = Clock()
    s = session(reauth_ms=1000, clock=clock)
    s.handshake("PLAIN", 1)
    s.authenticate(b"\0admin\0admin-secret")
    assert s.session_lifetime_ms == 1000
    clock.now += 1.5
    assert not s.admits(METADATA) and s.admits(HANDSHAKE)
    assert s.handshake("PLAIN", 1) == ErrorCode.NONE and s.reauthenticating
    s.authenticate(b"\0admin\0admin-secret")
    assert s.admits(METADATA)
    assert s.handshake("SCRAM-SHA-256", 1) == ErrorCode.ILLEGAL_SASL_STATE   # another mechanism: refused


def test_jaas_entries_and_continued_properties(tmp_path):
    options = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                         'password="a \\"quoted\\" secret" user_alice=alice-secret;')
    assert options == {"username": "admin", "password": 'a "quoted" secret', "user_alice": "alice-secret"}
    for bad in ('username="admin";', 'Module required username="x" stray;'):
        with pytest.raises(JaasError):
            parse_jaas(bad)
    path = tmp_path / "server.properties"
    path.write_text('a.sasl.jaas.config=Module required \\\n    username="u" \\\n    password="p";\nb=2\n')
    assert read_properties(str(path)) == {"a.sasl.jaas.config": 'Module required username="u" password="p";', "b": "2"}


def test_listener_settings_are_checked_at_start():
    jaas = 'Module required username="admin" password="pw" user_admin="pw";'
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas}
    security = listener_security(BrokerConfig.from_dict(base))["SASL_PLAINTEXT"]
    assert security.sasl.mechanisms == ["PLAIN", "SCRAM-SHA-512"] and security.sasl.plain_users == {"admin": "pw"}
    assert inter_broker_sasl(BrokerConfig.from_dict(base)) == SaslCredentials("PLAIN", "admin", "pw")
    for change, named in [({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
                          ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": None}, "sasl.jaas.config"),
                          ({"sasl.mechanism.inter.broker.protocol": "GSSAPI"}, "sasl.mechanism.inter.broker.protocol")]:
        config = BrokerConfig.from_dict({k: v for k, v in {**base, **change}.items() if v is not None})
        with pytest.raises(ConfigError, match=named):
            listener_security(config)
            inter_broker_sasl(config)


@pytest.mark.parametrize("zookeeper, known", [(None, True), ("127.0.0.1:1/kbroker", False)])
def test_a_cluster_broker_ignores_credentials_left_in_its_local_store(tmp_path, zookeeper, known):
    from kbroker.broker.metadata import LocalMetadataStore
    from kbroker.broker.server import Broker

    credential = scram.ScramCredential.from_password("SCRAM-SHA-512", "pw", b"salt-salt-salt!!", 4096)
    LocalMetadataStore(str(tmp_path), 0).set_user_credentials("old", {"SCRAM-SHA-512": credential.to_text()})
    settings = {"log.dirs": str(tmp_path), **({"zookeeper.connect": zookeeper} if zookeeper else {})}
    broker = Broker(BrokerConfig.from_dict(settings))
    assert (broker.credentials.lookup("old", "SCRAM-SHA-512") == credential) is known
