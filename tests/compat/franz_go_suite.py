"""franz-go's own integration tests (``pkg/kgo``), run against kbroker.

franz-go (twmb/franz-go, the Go client) tests itself against a live cluster named by ``KGO_SEEDS``: producing
and consuming at every acks and compression, idempotent and transactional ETL chains, classic and KIP-848
groups, share groups (KIP-932), regex subscriptions, admin requests and client telemetry (KIP-714). With
``KGO_TEST_CHAOS=1`` its ETL tests also cut every connection after 0.5-1.5 s, so the client reconnects,
retries and rewinds sequence numbers mid-run. The module comes from the Go module proxy into
``.cache/compat/go`` (``go`` from ``PATH`` or /usr/local/go; franz-go 1.22 wants Go 1.26, which the
toolchain fetches itself where the local one is older).

``python -m tests.compat.franz_go_suite`` runs the whole package against one broker (with a SASL listener
for its SCRAM and OAUTHBEARER tests) and prints each test's outcome.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from kbroker.broker.cluster.zookeeper_server import free_port
from tests.brokerproc import ROOT, BrokerProcess

MODULE, VERSION = "github.com/twmb/franz-go", "v1.22.3"
CACHE = os.path.join(ROOT, ".cache", "compat", "go")
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
SCRAM_USER = ("franz", "franz-secret")   # (TestSCRAMAuth's; its SASL tests skip themselves without seeds)
ETL_TESTS = "^(TestGroupETL|TestShareGroupETL|TestTxnEtl)$"
_OUTCOME = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+)", re.MULTILINE)


def go() -> str:
    """The go command: on PATH, else where the official archive installs it."""
    found = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if found is None:
        raise RuntimeError("franz-go's tests need Go (https://go.dev/dl, or /usr/local/go)")
    return found


def _env() -> dict[str, str]:
    return {**os.environ, "GOMODCACHE": os.path.join(CACHE, "mod"), "GOPATH": os.path.join(CACHE, "path"),
            "GOCACHE": os.path.join(CACHE, "build"), "GOFLAGS": "-modcacherw -mod=mod", "GOTOOLCHAIN": "auto"}


def source() -> str:
    """franz-go's module, downloaded once through the Go module proxy; returns its directory."""
    os.makedirs(CACHE, exist_ok=True)
    done = subprocess.run([go(), "mod", "download", "-json", f"{MODULE}@{VERSION}"], cwd=CACHE, env=_env(),
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"go mod download failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return json.loads(done.stdout)["Dir"]


def broker_with_sasl(data_dir: str) -> tuple[BrokerProcess, str]:
    """A broker with a SASL listener beside its plaintext one, offering SCRAM-SHA-256 (user ``SCRAM_USER``) and
    OAUTHBEARER (Kafka's default validator of unsigned tokens, which TestOAuthAuth sends); returns it and that
    listener's address."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    port = free_port()
    broker = BrokerProcess(data_dir, {
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_MODULE}).start()
    user, password = SCRAM_USER
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          password.encode())
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})   # (held: its futures die with it)
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    return broker, f"127.0.0.1:{port}"


def run(seeds: str, replication_factor: int, tests: str = ".", chaos: bool = False, count: int = 1,
        timeout: float = 1200, sasl_seeds: str | None = None) -> tuple[dict[str, str], str]:
    """(test name -> PASS, FAIL or SKIP, the run's output) for ``go test ./pkg/kgo -run tests`` against
    ``seeds`` (and ``sasl_seeds``, the listener of ``broker_with_sasl``); a test that ran ``count`` times keeps
    its worst outcome."""
    env = {**_env(), "KGO_SEEDS": seeds, "KGO_TEST_RF": str(replication_factor), "KGO_TEST_RECORDS": "50000"}
    if sasl_seeds:
        env.update(KGO_TEST_OAUTH_SEEDS=sasl_seeds, KGO_TEST_SCRAM_SEEDS=sasl_seeds,
                   KGO_TEST_SCRAM=":".join(SCRAM_USER))
    if chaos:
        env["KGO_TEST_CHAOS"] = "1"
    command = [go(), "test", "./pkg/kgo/", "-v", "-count", str(count), "-run", tests,
               "-timeout", f"{int(timeout)}s"]
    with tempfile.TemporaryDirectory(prefix="franz-go-") as work:   # (writable: go test may touch go.sum)
        tree = os.path.join(work, "franz-go")
        shutil.copytree(source(), tree)
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout + 120)
    log = done.stdout + done.stderr
    outcomes: dict[str, str] = {}
    for outcome, name in _OUTCOME.findall(log):
        if "/" not in name and outcomes.get(name) != "FAIL":   # (subtests count in their parent)
            outcomes[name] = outcome
    if done.returncode != 0 and "FAIL" not in outcomes.values():
        outcomes["(the run)"] = "FAIL"   # a build failure, a panic or the timeout: no test said why
    return outcomes, log


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        broker, sasl = broker_with_sasl(os.path.join(tmp, "data"))
        try:
            outcomes, log = run(broker.bootstrap, 1, sasl_seeds=sasl)
        finally:
            broker.stop()
    counts = {k: sum(1 for v in outcomes.values() if v == k) for k in ("PASS", "FAIL", "SKIP")}
    print(f"franz-go {VERSION} pkg/kgo against kbroker: {counts['PASS']} passed, {counts['FAIL']} failed, "
          f"{counts['SKIP']} skipped")
    for name, outcome in sorted(outcomes.items()):
        if outcome != "PASS":
            print(f"  {outcome.lower()}: {name}")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
