"""`make bench SUITE=connections`: what hostile and heavy connections cost one kbroker (issue 34's figures).

Rows: a fresh connection's ApiVersions round trip (p50/p99) while 20 connections pipeline 100,000 requests
each and read no answer; resident memory per idle connection (3,000 held at once) and what stays after they
close; resident memory while 300 connections announce 100 MB frames and trickle bytes. The attacks are
``tests.hostile``'s, against a broker process with its default settings.
"""

from __future__ import annotations

from tests import hostile
from tests.brokerproc import BrokerProcess

MB = 1 << 20


def measure(workdir: str) -> list[tuple[str, str]]:
    broker = BrokerProcess(f"{workdir}/connections").start()
    rows = []
    try:
        pid = broker.proc.pid
        times = hostile.flood_probe(broker.port, connections=20, requests=100_000, probes=200, seconds=60)
        rows.append(("probe beside a 20-connection pipelined flood",
                     f"p50 {hostile.percentile(times, 0.5) * 1000:.1f} ms, "
                     f"p99 {hostile.percentile(times, 0.99) * 1000:.1f} ms ({len(times)} probes)"))
        print(f"  {rows[-1][0]}: {rows[-1][1]}", flush=True)
        before = hostile.settled_rss(pid)
        socks = [hostile.connect(broker.port) for _ in range(3000)]
        hostile.wait_for(lambda: hostile.open_fds(pid) > 3000, 10)
        held = hostile.settled_rss(pid) - before
        hostile.close_all(socks)
        hostile.wait_for(lambda: hostile.open_fds(pid) < 50, 10)
        rows.append(("memory per idle connection (3,000 held)",
                     f"{held / 3000 / 1024:.1f} KiB; {(hostile.settled_rss(pid) - before) / MB:.0f} MB kept after they close"))
        print(f"  {rows[-1][0]}: {rows[-1][1]}", flush=True)
        before = hostile.settled_rss(pid)
        socks = hostile.announce_frames(broker.port, 300, 100_000_000)
        hostile.trickle(socks, seconds=3)
        grown = hostile.rss_bytes(pid) - before
        probe = hostile.probe_round_trip(broker.port)
        hostile.close_all(socks)
        rows.append(("300 connections announcing 100 MB frames",
                     f"+{grown / MB:.0f} MB resident; a probe meanwhile {probe * 1000:.1f} ms"))
        print(f"  {rows[-1][0]}: {rows[-1][1]}", flush=True)
    finally:
        broker.stop()
    return rows


def table(rows: list[tuple[str, str]]) -> str:
    return "\n".join(["| | kbroker |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)])
