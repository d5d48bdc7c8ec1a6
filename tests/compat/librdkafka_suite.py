"""librdkafka's own test programs, run against kbroker: those that call Kafka's command-line tools, and the
whole suite.

librdkafka's suite (``tests/`` of its source, one ``test-runner`` built from it) takes an external broker
from ``test.conf``; a few tests create their topics with ``$KAFKA_PATH/bin/kafka-topics.sh`` (0045, 0052,
0077), which a Kafka distribution has and a client library's checkout does not. Here the source comes from
the npm registry (Confluent's JavaScript client vendors librdkafka's whole tree, tests included: 2.15.1 in
1.10.1, whose 0077 knows Kafka 4.1's 1 MiB minimum segment.bytes, which 2.12's sets below), is built once
into ``.cache/compat``, and ``KAFKA_PATH`` is Kafka's tools run from Maven Central's jars
(``tests.reference.apache_kafka.kafka_path``).

``python -m tests.compat.librdkafka_suite [TESTS]`` builds what is missing, starts a broker and prints each
test's outcome; ``TOOL_TESTS`` is what ``make test-slow`` insists on. ``python -m tests.compat.librdkafka_suite
all`` runs every test that needs a broker (in the runner's quick mode), on one broker configured as
librdkafka's own test brokers are (``SUITE_SETTINGS``), and those that need three brokers (``CLUSTER_TESTS``)
on a three-broker cluster; ``make test-compat`` runs it.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import tarfile
import urllib.request

from tests.brokerproc import ROOT, BrokerProcess

PACKAGE = "kafka-javascript-1.10.1"         # @confluentinc/kafka-javascript, librdkafka 2.15.1 inside
PACKAGE_URL = f"https://registry.npmjs.org/@confluentinc/kafka-javascript/-/{PACKAGE}.tgz"
CACHE = os.path.join(ROOT, ".cache", "compat")
SOURCE = os.path.join(CACHE, PACKAGE, "package", "deps", "librdkafka")
CONFIGURE = ["--disable-zstd", "--disable-gssapi", "--disable-curl", "--disable-sasl"]   # not needed here

# The tests that call Kafka's scripts: message timestamps by topic config (CreateTime, LogAppendTime, each
# plain and compressed) and compaction (keys, tombstones and transactional records compacted by the broker).
TOOL_TESTS = ["0052", "0077"]
BROKER_VERSION = "4.2.0"   # what the tests assume of the broker (kbroker answers as Kafka 4.2)
# What librdkafka's own test brokers run with (its trivup clusters) and its tests count on: auto-created topics
# of 4 partitions (0012, 0015, 0029, 0054, 0056 and 0057 produce to partition 1 of one), Kafka's initial
# rebalance delay (0118's two consumers must join the first generation together) and an authorizer (0081, 0109,
# 0115 and 0119 add ACLs).
SUITE_SETTINGS = {"num.partitions": "4", "group.initial.rebalance.delay.ms": "3000",
                  "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                  "allow.everyone.if.no.acl.found": "true"}
CLUSTER_TESTS = ["0103"]   # (transactions on topics of replication factor 3)
# The runner's options for the whole suite: quick mode, no test of librdkafka alone (mock clusters, unit
# tests), none through its socket emulator; five tests at a time (the runner's default: one at a time takes
# about 15 minutes). Tests run side by side print into each other's lines, and the runner's summary may
# list a long one as still running: such a test's outcome is "not run".
SUITE_OPTIONS = ["-Q", "-L", "-E"]


def build() -> str:
    """The built ``test-runner``, made on first use. A lock keeps two processes from building at once; the
    ``complete`` marker is written last, so a half-done build is done again."""
    os.makedirs(CACHE, exist_ok=True)
    runner, done = os.path.join(SOURCE, "tests", "test-runner"), os.path.join(CACHE, f"{PACKAGE}.complete")
    with open(os.path.join(CACHE, ".librdkafka.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(done) and os.path.exists(runner):
            return runner
        package = os.path.join(CACHE, f"{PACKAGE}.tgz")
        if not os.path.exists(package):
            request = urllib.request.Request(PACKAGE_URL, headers={"User-Agent": "kbroker-tests"})
            with urllib.request.urlopen(request, timeout=120) as answer, open(package + ".tmp", "wb") as f:
                f.write(answer.read())
            os.replace(package + ".tmp", package)
        with tarfile.open(package) as archive:
            archive.extractall(os.path.join(CACHE, PACKAGE), filter="data",
                               members=[m for m in archive.getmembers() if m.name.startswith("package/deps/librdkafka/")])
        for step in (["./configure", *CONFIGURE], ["make", "-j2", "libs"], ["make", "-j2", "-C", "tests", "build"]):
            run = subprocess.run(step, cwd=SOURCE, capture_output=True, text=True)
            if run.returncode != 0:
                raise RuntimeError(f"building librdkafka's tests failed at {' '.join(step)}:\n"
                                   f"{run.stdout[-3000:]}{run.stderr[-3000:]}")
        open(done, "w").close()
    return runner


def suite_tests() -> list[str]:
    """Every test number of the built suite (its source files' four digits)."""
    names = os.listdir(os.path.dirname(build()))
    return sorted({m.group(1) for n in names if (m := re.fullmatch(r"(\d{4})-.*\.(?:c|cpp)", n))})


def run(broker, tests: list[str], timeout: float = 900, options: list[str] | None = None) -> dict[str, str]:
    """Test number -> PASSED, FAILED or SKIPPED (or ``not run``), and the runner's output under ``"log"``;
    ``broker``: what has a ``bootstrap`` (a BrokerProcess, a tests.cluster.Cluster)."""
    from tests.reference.apache_kafka import kafka_path

    runner = build()
    directory = os.path.dirname(runner)
    with open(os.path.join(directory, "test.conf"), "w") as f:
        f.write(f"bootstrap.servers={broker.bootstrap}\n")
    # (the runner links librdkafka dynamically: without the path it would load the machine's own, if any)
    libraries = os.pathsep.join([os.path.join(SOURCE, "src"), os.path.join(SOURCE, "src-cpp")])
    env = dict(os.environ, KAFKA_PATH=kafka_path(), BROKERS=broker.bootstrap, TEST_KAFKA_VERSION=BROKER_VERSION,
               TESTS=",".join(tests), LD_LIBRARY_PATH=libraries)
    done = subprocess.run(["./test-runner", *(options or [])], cwd=directory, env=env, capture_output=True,
                          text=True, timeout=timeout)
    log = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)   # (without the runner's colours)
    outcomes: dict[str, str] = {t: "not run" for t in tests}
    # Each test ends with "===== Test 0052_msg_timestamps PASSED =====" (FAILED, SKIPPED), and the runner's
    # summary has a row for each ("| 0052_msg_timestamps | PASSED | 1.2s |"; those its options filtered out
    # have only that); a test of several parts (0077_compaction, 0077_compaction_...) passes when every part does.
    seen: dict[str, set[str]] = {}
    for pattern in (r"=+ Test (\d{4})_\w+ (PASSED|FAILED|SKIPPED) =+",
                    r"(?m)^\| (\d{4})_\w+ +\| +(PASSED|FAILED|SKIPPED) "):
        for number, outcome in re.findall(pattern, log):
            seen.setdefault(number, set()).add(outcome)
    for number, kinds in seen.items():
        outcomes[number] = next(k for k in ("FAILED", "PASSED", "SKIPPED") if k in kinds)
    outcomes["log"] = log
    return outcomes


def run_suite() -> dict[str, str]:
    """The whole suite (``SUITE_OPTIONS``): every test on one broker with ``SUITE_SETTINGS``, but
    ``CLUSTER_TESTS`` on three; outcomes as ``run``'s, the logs under ``"log"``."""
    import tempfile

    from tests.cluster import Cluster

    broker = BrokerProcess(tempfile.mkdtemp(prefix="kbroker-librdkafka-"), SUITE_SETTINGS).start()
    try:
        results = run(broker, [t for t in suite_tests() if t not in CLUSTER_TESTS], 3600, SUITE_OPTIONS)
    finally:
        broker.stop()
    cluster = Cluster(tempfile.mkdtemp(prefix="kbroker-librdkafka-"), overrides=SUITE_SETTINGS).start()
    try:
        on_cluster = run(cluster, CLUSTER_TESTS, 900, SUITE_OPTIONS)
    finally:
        cluster.stop()
    return {**results, **on_cluster, "log": results["log"] + on_cluster["log"]}


def main() -> None:
    import tempfile

    if sys.argv[1:] == ["all"]:
        results = run_suite()
        counts = {k: sum(1 for t, v in results.items() if t != "log" and v == k)
                  for k in ("PASSED", "SKIPPED", "FAILED", "not run")}
        with open(os.path.join(CACHE, "librdkafka-suite.log"), "w") as f:
            f.write(results["log"])
        print(f"librdkafka's suite: {counts} (the runner's output: {os.path.join(CACHE, 'librdkafka-suite.log')})")
        for test, outcome in sorted(results.items()):
            if outcome in ("FAILED", "not run"):
                print(f"{test}: {outcome}")
        sys.exit(1 if counts["FAILED"] else 0)
    tests = sys.argv[1].split(",") if len(sys.argv) > 1 else TOOL_TESTS
    broker = BrokerProcess(tempfile.mkdtemp(prefix="kbroker-librdkafka-")).start()
    try:
        results = run(broker, tests)
    finally:
        broker.stop()
    for test in tests:
        print(f"{test}: {results[test]}")
    sys.exit(0 if all(results[t] == "PASSED" for t in tests) else 1)


if __name__ == "__main__":
    main()
