"""SCRAM's derivations against RFC 7677's worked example, and Kafka's text form of a stored credential."""

import base64

import pytest

from kbroker.protocol import scram

# RFC 7677 section 3: user "user", password "pencil".
CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
WITHOUT_PROOF = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
AUTH_MESSAGE = f"{CLIENT_FIRST_BARE},{SERVER_FIRST},{WITHOUT_PROOF}".encode()


def test_the_rfc_7677_example_proof_and_signature():
    salted = scram.salted_password("SCRAM-SHA-256", "pencil", SALT, 4096)
    assert scram.b64(scram.client_proof("SCRAM-SHA-256", salted, AUTH_MESSAGE)) == PROOF
    credential = scram.ScramCredential.from_password("SCRAM-SHA-256", "pencil", SALT, 4096)
    assert scram.verify_proof("SCRAM-SHA-256", credential, AUTH_MESSAGE, scram.unb64(PROOF))
    assert scram.b64(scram.server_signature("SCRAM-SHA-256", credential.server_key, AUTH_MESSAGE)) == SERVER_SIGNATURE
    wrong = scram.ScramCredential.from_password("SCRAM-SHA-256", "pencils", SALT, 4096)
    assert not scram.verify_proof("SCRAM-SHA-256", wrong, AUTH_MESSAGE, scram.unb64(PROOF))
    assert not scram.verify_proof("SCRAM-SHA-256", credential, AUTH_MESSAGE, b"short")


def test_a_credential_reads_back_from_kafkas_text_form_and_holds_no_password():
    credential = scram.ScramCredential.from_password("SCRAM-SHA-512", "secret", b"0123456789abcdef", 8192)
    text = credential.to_text()
    assert text.startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=") and text.endswith(",iterations=8192")
    assert scram.ScramCredential.from_text(text) == credential
    assert len(credential.stored_key) == len(credential.server_key) == 64
    for bad in ("salt=AAAA,iterations=4096", "salt=!!,stored_key=AA==,server_key=AA==,iterations=1", "garbage"):
        with pytest.raises(scram.ScramError):
            scram.ScramCredential.from_text(bad)


def test_sasl_names_escape_comma_and_equals():
    assert scram.encode_name("a,b=c") == "a=2Cb=3Dc"
    assert scram.decode_name("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(scram.ScramError):
        scram.decode_name("a=4Fb")
