"""What SASL_SSL costs: the same produce and fetch over one broker's PLAINTEXT and SASL_SSL (PLAIN) listeners.

The broker serves both listeners at once, so the two rows differ only in the
transport; certificates are made at run time as the tests make them.
"""

from __future__ import annotations

import os

from bench import loadgen
from bench.brokers import KBroker
from tests.integration.test_sasl import listener_port
from tests.tls import make_pki

SIZE, COUNT, PARTITIONS = 1024, 1_000_000, 6
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="bench" '
        'password="bench-secret" user_bench="bench-secret";')


def measure(workdir: str, create_topic, delete_topic, one, scale: float = 1.0) -> list[tuple]:
    pki = make_pki(os.path.join(workdir, "pki"))
    broker = KBroker(os.path.join(workdir, "kbroker-security"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT", "ssl.keystore.location": pki.broker,
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS})
    secure = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=bench",
              "-X", "sasl.password=bench-secret", "-X", f"ssl.ca.location={pki.ca}"]
    count = int(COUNT * scale)
    rows = []
    try:
        ports = {"PLAINTEXT": broker.proc.port, "SASL_SSL": listener_port(broker.proc, "SASL_SSL")}
        broker.name = "kbroker"
        for protocol, extra in (("PLAINTEXT", []), ("SASL_SSL", secure)):
            bootstrap = f"127.0.0.1:{ports[protocol]}"
            topic = f"bench-security-{protocol.lower()}"
            create_topic(f"127.0.0.1:{ports['PLAINTEXT']}", topic)
            rows.append(one(broker, f"produce {SIZE} B acks=1 {protocol}", [
                "-P", "-t", topic, "-s", str(SIZE), "-c", str(count), "-a", "1", "-b", bootstrap,
                "-X", "linger.ms=5", *extra]))
            partitions = [a for p in range(PARTITIONS) for a in ("-p", str(p))]
            rows.append(one(broker, f"fetch {SIZE} B {protocol}", [
                "-C", "-t", topic, *partitions, "-o", "beginning", "-c", str(count), "-b", bootstrap, *extra]))
            delete_topic(f"127.0.0.1:{ports['PLAINTEXT']}", topic)
    finally:
        broker.stop()
    return rows


def table(rows: list[tuple]) -> str:
    lines = ["| scenario | MB/s | records/s | broker CPU |", "|---|---|---|---|"]
    for _, scenario, run in rows:
        if isinstance(run, loadgen.Run):
            lines.append(f"| {scenario} | {run.mb_per_s:.1f} | {run.msgs_per_s:,.0f} | {run.broker_cpu:.0%} |")
        else:
            lines.append(f"| {scenario} | {run} | | |")
    return "\n".join(lines)
