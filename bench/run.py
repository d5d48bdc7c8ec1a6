"""`make bench`: produce and fetch throughput of kbroker, Tansu and noida-db, side by side in one run.

Every broker gets the same scenarios from the same librdkafka load generator:
produce 100 B and 1 KiB records with acks=1 and acks=all to a 6-partition
topic, then fetch the acks=1 topic back from the beginning. The table, the
machine and the commands go to docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import sys
import tempfile
import time

from bench import (brokers, cluster_partitions, connections, durability, groups, idle_cluster, kafka_tools, latency,
                   loadgen, partitions, replication, requests, security, spark, transactions, txn_floor)
from tests.brokerproc import ROOT
from tests.reference.apache_kafka import HEAP

PARTITIONS = 6
SCENARIOS = [(100, 2_000_000), (1024, 600_000)]   # (record size, records per run)


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def delete_topic(bootstrap: str, name: str) -> None:
    """Each scenario starts from the same state: the previous one's data (and its dirty pages) is gone."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([name])[name].result(30)
    except Exception as exc:  # a broker without DeleteTopics keeps the data; the run goes on
        print(f"  (could not delete {name}: {exc})", flush=True)
    time.sleep(2)   # let the kernel drop the deleted files' pages before the next scenario


def measure(broker, scale: float) -> list[tuple]:
    rows = []
    for size, count in SCENARIOS:
        count = int(count * scale)
        for acks in ("1", "all"):
            topic = f"bench-{size}-{acks}"
            create_topic(broker.bootstrap, topic)
            rows.append(_one(broker, f"produce {size} B acks={acks}", [
                "-P", "-t", topic, "-s", str(size), "-c", str(count), "-a", "-1" if acks == "all" else acks,
                "-b", broker.bootstrap, "-X", "linger.ms=5"]))
            if acks == "1":
                # The fetch reads the first `count` records of the acks=1 topic (which holds REPEATS times that).
                partitions = [a for p in range(PARTITIONS) for a in ("-p", str(p))]
                rows.append(_one(broker, f"fetch {size} B", [
                    "-C", "-t", topic, *partitions, "-o", "beginning", "-c", str(count), "-b", broker.bootstrap]))
            delete_topic(broker.bootstrap, topic)
    # The idempotent producer's cost: the acks=all scenario again with sequence numbers and producer state.
    topic = f"bench-{size}-idempotent"
    create_topic(broker.bootstrap, topic)
    rows.append(_one(broker, f"produce {size} B idempotent", [
        "-P", "-t", topic, "-s", str(size), "-c", str(count), "-a", "-1", "-b", broker.bootstrap,
        "-X", "linger.ms=5", "-X", "enable.idempotence=true"]))
    delete_topic(broker.bootstrap, topic)
    return rows


REPEATS = 3


def _one(broker, scenario: str, args: list[str]) -> tuple:
    """The median of REPEATS runs (by MB/s): single runs of a durable broker swing with page-cache state."""
    runs = []
    for _ in range(REPEATS):
        try:
            runs.append(loadgen.run(args, broker.pid, timeout=60 if "-C" in args else 120))
        except loadgen.TimedOut as exc:
            print(f"  {broker.name:9} {scenario:24}: {exc}", flush=True)
            return broker.name, scenario, str(exc)
    runs.sort(key=lambda r: r.mb_per_s)
    run = runs[len(runs) // 2]
    print(f"  {broker.name:9} {scenario:24}: {run.mb_per_s:8.1f} MB/s {run.msgs_per_s:10.0f} rec/s  "
          f"loadgen {run.loadgen_cpu:4.0%}  broker {run.broker_cpu:4.0%}", flush=True)
    return broker.name, scenario, run


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({model}), {mem:.0f} GiB, {platform.system()} {platform.release()}, " \
           f"Python {platform.python_version()}"


def _cell(run, scenario: str, name: str) -> str:
    if run is None or isinstance(run, str):
        return run or "n/a"
    cell = f"{run.mb_per_s:.1f} MB/s, {run.msgs_per_s:,.0f} rec/s (gen {run.loadgen_cpu:.0%}, broker {run.broker_cpu:.0%})"
    return cell + " *" if scenario.startswith("fetch") and name == "noida-db" else cell


def _table_lines(names: list[str], scenarios: list[str], cell) -> list[str]:
    lines = ["| scenario | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    return lines + [f"| {s} | " + " | ".join(cell(s, n) for n in names) + " |" for s in scenarios]


def table(rows: list[tuple], notes: dict[str, str]) -> str:
    scenarios = list(dict.fromkeys(r[1] for r in rows))
    names = list(dict.fromkeys(r[0] for r in rows))
    by = {(r[0], r[1]): r[2] for r in rows}
    lines = _table_lines(names, scenarios, lambda s, n: _cell(by.get((n, s)), s, n))
    lines.append("")
    lines.append("CPU shares are of one core, measured over each run's wall time: `gen` is the load generator, "
                 "which shares the two cores with the broker.")
    lines += [f"- {n}: {notes[n]}" for n in names]
    lines.append("- \\* noida-db ignores the fetch `max_bytes` limit, so its fetch figure is not comparable.")
    return "\n".join(lines)


KAFKA_HEAP_NAME = "kafka (reference heap)"
RATIO = "kbroker ÷ kafka"


def _first_number(cell: str | None) -> float | None:
    found = re.search(r"[0-9][0-9,]*\.?[0-9]*", cell or "")
    return float(found.group().replace(",", "")) if found else None


def _ratios(names: list[str], cells: dict[str, dict[str, str]]) -> None:
    """The kbroker ÷ kafka column: the first figure of each cell (MB/s, commits/s, ms, MB) over Kafka's."""
    if "kbroker" not in names or "kafka" not in names:
        return
    if RATIO not in names:
        names.append(RATIO)
    for row in cells.values():
        ours, theirs = _first_number(row.get("kbroker")), _first_number(row.get("kafka"))
        row[RATIO] = f"{ours / theirs:.2f}" if ours is not None and theirs else "n/a"


def merge_rows(rows: list[tuple], suite: str) -> None:
    """``--suite throughput``, ``groups`` or ``transactions`` runs some rows of the main table: those rows are
    replaced (or added) and the others kept, with a line saying which rows came from which suite's run when."""
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    doc = open(path).read()
    start = doc.index("| scenario |")
    end = doc.index("\n\n", start)
    lines = doc[start:end].splitlines()
    names = [c.strip() for c in lines[0].strip().strip("|").split("|")][1:]
    scenarios, cells = [], {}
    for line in lines[2:]:
        parts = [c.strip() for c in line.strip().strip("|").split("|")]
        scenarios.append(parts[0])
        cells[parts[0]] = dict(zip(names, parts[1:]))
    for name, scenario, run in rows:
        if scenario not in cells:
            scenarios.append(scenario)
        if name not in names:
            names.append(name)
        cells.setdefault(scenario, {})[name] = _cell(run, scenario, name)
    _ratios(names, cells)
    merged = "\n".join(_table_lines(names, scenarios, lambda s, n: cells[s].get(n, "n/a")))
    stamp = f"(`SUITE={suite}` rows: {datetime.date.today().isoformat()}.)"
    after = doc[end:]
    found = re.search(rf"^\(`SUITE={suite}` rows: [^)]*\.\)$", after, re.M)
    after = after[:found.start()] + stamp + after[found.end():] if found else "\n\n" + stamp + after
    with open(path, "w") as f:
        f.write(doc[:start] + merged + after)
    print(f"wrote {path}")


def latency_table(rows: list[tuple]) -> str:
    scenarios = list(dict.fromkeys(r[1] for r in rows))
    names = list(dict.fromkeys(r[0] for r in rows))
    by = {(r[0], r[1]): r[2] for r in rows}
    lines = ["| scenario | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    lines += [f"| {s} | " + " | ".join(by.get((n, s), "") for n in names) + " |" for s in scenarios]
    return "\n".join(lines)


def replication_table(rows: list[tuple]) -> str:
    lines = [latency_table(rows), ""]
    lines.append(f"A cluster of three kbroker processes and ZooKeeper, then one of three Apache Kafka KRaft nodes "
                 f"(broker and controller each, heap {' '.join(HEAP)}), on this machine; {PARTITIONS} partitions, "
                 f"leaders spread over the brokers, data on a tmpfs; {int(replication.RECORDS):,} records of 1 KiB "
                 f"per throughput round, {replication.REPEATS} rounds of each case (a topic of its own each, "
                 f"deleted after it; the two cases' rounds alternate), quiet and then with one core kept busy by "
                 f"a CPU-bound process the bench starts and stops; the produce rows give the median round. MB "
                 f"appended per broker CPU-second: the records' bytes times the replication factor over the three "
                 f"broker processes' utime + stime during the round; the (floor) rows move the same bytes with "
                 f"three plain processes doing nothing else (`bench/replication_floor.py`). Latency (quiet) at a fixed "
                 f"{replication.RATE} records/s for {replication.LATENCY_SECONDS} s with `linger.ms=0`. See "
                 f"`bench/replication.py`.")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the default record counts")
    parser.add_argument("--only", action="append", help="kbroker, tansu or noida-db (default: all)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md")
    parser.add_argument("--suite", choices=["all", "throughput", "groups", "transactions", "replication", "spark",
                                            "security", "requests", "latency", "connections", "partitions",
                                            "cluster-partitions", "peers", "tools"],
                        default="all",
                        help="which scenarios to run (default: all)")
    parser.add_argument("--cluster-dir", help="parent folder of the replication clusters' data (default: a tmpfs, "
                                              "/dev/shm where it is one)")
    parser.add_argument("--kbroker-override", action="append", default=[], metavar="KEY=VALUE",
                        help="broker config for the kbroker run (e.g. kbroker.fetch.sendfile=false)")
    args = parser.parse_args()
    loadgen.build()
    overrides = dict(item.split("=", 1) for item in args.kbroker_override)
    starters = {"kbroker": lambda wd: brokers.KBroker(wd, overrides), "kafka": brokers.Kafka,
                KAFKA_HEAP_NAME: lambda wd: brokers.Kafka(wd, HEAP, KAFKA_HEAP_NAME),
                "tansu": brokers.tansu, "noida-db": brokers.noida}
    rows, notes, spark_rows, latency_rows = [], {}, [], []
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-") as tmp:
        for name, start in starters.items():
            if args.only and name not in args.only or args.suite in ("replication", "security", "requests",
                                                                     "connections", "partitions") or (
                    args.suite == "spark" and name != "kbroker"):
                continue
            if name == KAFKA_HEAP_NAME and args.suite not in ("all", "throughput", "peers"):
                continue   # (Kafka with the reference heap: the throughput and memory rows only)
            if args.suite == "tools" and name not in ("kbroker", "kafka"):
                continue   # (Kafka's own tools: against kbroker and Kafka)
            print(f"{name}:", flush=True)
            broker = start(os.path.join(tmp, name))
            notes[broker.name] = broker.note
            try:
                if args.suite in ("all", "peers"):
                    time.sleep(2)
                    rows.append((broker.name, "memory: RSS idle", f"{brokers.rss_mb(broker.pid)[0]:.0f} MB"))
                if args.suite == "latency":   # (its own suite: it needs the machine quiet, not after a bulk run)
                    latency_rows += latency.measure(broker.name, broker.bootstrap,
                                                    lambda bootstrap, topic: create_topic(bootstrap, topic, 1))
                    continue
                if args.suite in ("all", "throughput", "peers"):
                    rows += measure(broker, args.scale)
                if args.suite in ("all", "peers", "tools") and name in ("kbroker", "kafka"):
                    rows += kafka_tools.measure(broker, create_topic, args.scale)
                if args.suite == "tools":
                    continue
                if args.suite in ("all", "peers"):
                    rows.append((broker.name, "memory: peak RSS (produce and fetch runs)",
                                 f"{brokers.rss_mb(broker.pid)[1]:.0f} MB"))
                if name == KAFKA_HEAP_NAME:
                    continue
                if args.suite in ("all", "groups", "peers"):
                    rows += groups.measure(broker, create_topic)
                if args.suite in ("all", "transactions", "peers"):
                    rows += transactions.measure(broker, create_topic)
                if args.suite in ("all", "spark") and name == "kbroker":
                    spark_rows = spark.measure(broker, create_topic, args.scale)
                if args.suite in ("all", "transactions", "peers"):   # last: it kills the broker and starts it again
                    rows += durability.measure(broker, create_topic)
            finally:
                broker.stop()
        if args.suite in ("all", "transactions", "peers") and (not args.only or "kbroker" in args.only):
            print(f"{txn_floor.NAME}:", flush=True)
            floor = txn_floor.floor(os.path.join(tmp, "floor"))
            notes[floor.name] = floor.note
            try:
                rows += transactions.measure(floor, lambda bootstrap, topic: None)
            finally:
                floor.stop()
    result = table(rows, notes) if rows else ""
    if args.suite in ("all", "replication") and (not args.only or "kbroker" in args.only):
        replicated = replication.measure(args.scale, args.cluster_dir) + idle_cluster.rows()
        result += "\n\n## Replication\n\n" + replication_table(replicated)
    if args.suite == "latency" and (not args.only or "kbroker" in args.only):
        latency_rows += latency.measure_cluster(args.cluster_dir)
    if latency_rows:
        result += "\n\n## Latency\n\n" + latency_table(latency_rows) + LATENCY_NOTE
    if spark_rows:
        result += "\n\n## Spark\n\n" + spark.table(spark_rows, args.scale)
    if args.suite in ("all", "requests") and (not args.only or "kbroker" in args.only):
        print("kbroker, one request after another on one connection:", flush=True)
        cold, warm = requests.embedded_start()
        print(f"  in-process broker start: {warm:.1f} ms ({cold:.0f} ms for the first, with imports)", flush=True)
        result += ("\n\n## Small requests\n\n" + requests.table(requests.measure()) + REQUESTS_NOTE +
                   f"\n\nIn-process broker (`broker.embedded.KBroker`, the `kbroker` pytest fixture): ready in "
                   f"{warm:.1f} ms (median of 5 starts; {cold:.0f} ms for a fresh interpreter's first, imports "
                   f"included).")
    if args.suite in ("all", "security") and (not args.only or "kbroker" in args.only):
        print("kbroker, PLAINTEXT and SASL_SSL listeners:", flush=True)
        with tempfile.TemporaryDirectory(prefix="kbroker-bench-") as tmp:
            result += "\n\n## Security\n\n" + security.table(
                security.measure(tmp, create_topic, delete_topic, _one, args.scale)) + SECURITY_NOTE
    if args.suite in ("all", "connections") and (not args.only or "kbroker" in args.only):
        print("kbroker, hostile and heavy connections:", flush=True)
        with tempfile.TemporaryDirectory(prefix="kbroker-bench-") as tmp:
            result += "\n\n## Connections\n\n" + connections.table(connections.measure(tmp)) + CONNECTIONS_NOTE
    if args.suite in ("all", "partitions") and (not args.only or "kbroker" in args.only):
        print(f"kbroker, many partitions (descriptor limit {partitions.LIMIT:,}):", flush=True)
        with tempfile.TemporaryDirectory(prefix="kbroker-bench-") as tmp:
            result += "\n\n## Partitions\n\n" + partitions.table(partitions.measure(tmp)) + PARTITIONS_NOTE
    if args.suite in ("all", "cluster-partitions") and (not args.only or "kbroker" in args.only):
        print("kbroker cluster, many idle replicated partitions:", flush=True)
        result += "\n\n## Cluster partitions\n\n" + cluster_partitions.table(cluster_partitions.measure()) + \
            CLUSTER_PARTITIONS_NOTE
    print(result)
    if not args.no_write:
        if args.suite == "replication":
            splice(result, "Replication", "replication")
        elif args.suite == "spark":
            splice(result, "Spark", "spark")
        elif args.suite == "requests":
            splice(result, "Small requests", "requests")
        elif args.suite == "security":
            splice(result, "Security", "security")
        elif args.suite == "latency":
            splice(result, "Latency", "latency")
        elif args.suite == "connections":
            splice(result, "Connections", "connections")
        elif args.suite == "partitions":
            splice(result, "Partitions", "partitions")
        elif args.suite == "cluster-partitions":
            splice(result, "Cluster partitions", "cluster-partitions")
        elif args.suite in ("throughput", "groups", "transactions", "peers", "tools"):
            merge_rows(rows, args.suite)
        else:
            write_doc(result, args)
    return 0


LATENCY_NOTE = """

End to end, produce to consume, of 1 KiB records sent at a fixed rate for 10 s to a one-partition topic
(`bench/latency.py`): each record carries its send time, a consumer in its own process subtracts it from the
time it reads the record; librdkafka on both sides (`linger.ms=0`, at most 5 requests in flight as the Java
producer's default, acks=1 on the single brokers, acks=all with idempotence and min.insync.replicas=2 on the
cluster); the first second is left out. One machine of two cores runs the broker(s), the producer and the
consumer."""


REQUESTS_NOTE = """

One kbroker; one connection sends a request, reads the answer, sends the next, for 5 s per row
(`bench/requests.py`: frames encoded once, so the client costs a socket write and read). Requests/s is
bounded by the round trip through both processes on two cores; broker CPU per request is the broker's own
cost. The profile names the broker functions with the most samples, callers included. The share row
(`bench/share_parked.py`) produces while one share member holds the partition's 2,000 records in flight and
another member's ShareFetch waits for records it may acquire, woken by each write."""


CONNECTIONS_NOTE = """

One kbroker with its default settings (`bench/connections.py`, the attacks of `tests/hostile.py`). Before issue
34 the same broker answered the flood's probe at p99 4.9 s (11.3 s in the issue's run), held 260 KiB per idle
connection and kept 784 MB after 3,000 closed, and 300 connections announcing 100 MB frames took it past
24 GB (OOM-killed); 30 of them, measured here, took +690 MB resident and a probe 6.5 s."""


CLUSTER_PARTITIONS_NOTE = """

ZooKeeper and three brokers on the cluster tests' settings, data on tmpfs (`bench/cluster_partitions.py`): topics
of 100 partitions at RF=3 created 10 at a time, then a follower killed with kill -9 once the leaders moved and
its ISRs shrank started again, timed until every ISR is whole (Metadata of every partition every 0.5 s); then
acks=all writes of 100 B to a partition of their own, one at a time (librdkafka, `linger.ms` 0), their rate
and the three brokers' utime + stime per write, every other partition idle."""

PARTITIONS_NOTE = """

One kbroker with a descriptor limit of 20,000 (`bench/partitions.py`), topics of 100 partitions created 50 at a
time, nothing written; idle CPU over 60 s once created (one `log.flush.offset.checkpoint.interval.ms`, so the
minute's checkpoint is counted once; until 2026-12-01 a 10 s window, which caught it one run in six); Metadata
v12 for all topics, median of 5, the answer read whole but not decoded (until 2026-11-30 the bench's Python
client decoded it, about 260 ms of the 882 ms then shown at 50,000); restart: SIGTERM to listening again on the
same data. Before issue 35 the same
broker held 3 descriptors per partition and stopped itself at 6,661 partitions (`all_log_dirs_failed`), unable
to restart on its data; 5,000 partitions were created in 16.6 s and restarted in 1.7 s.

The descriptors stay at the cache's capacity, half the limit (`storage/open_files.py`), however many
partitions there are. Until 2026-12-01 the idle CPU was the periodic passes over every log (7.3 % at 50,000 on
2026-12-01): the bench's broker runs with the test settings, whose `log.cleaner.backoff.ms` of 200 ms had the
cleaner look at all 50,000 logs five times a second, and the 1 s flush-by-time pass did the rest. The passes now
walk lists of the logs they concern (the compacted ones; those with a finite `flush.ms`), listed again only when
a log comes or goes or a config changes (`storage/logs.py`): at 20,000 idle partitions 0.1-0.2 % against 2.6-4.2 %
before, measured one after the other. What was left at 50,000 was the minute's checkpoint: its three files
sorted and formatted again though nothing in them had changed, 0.22-0.24 s of CPU on the event loop in six
10 s windows. Each file is still written at every interval (that write is what finds a failed log dir under
idle partitions, as Kafka's does), but its text is made again only when a partition or an offset in it changed
(`storage/checkpoint.py`), and each log keeps its log dir's name rather than cutting it from its path for every
checkpoint: 0.06 s at 50,000 idle partitions (0.35 s for the first, which makes the text; the table's
minute after creation holds that first one).

The Metadata for all topics is answered from entries kept encoded (`broker/handlers/metadata_topics.py`), each
topic's per answer version, while what it was made from holds (the same `TopicMetadata`, partition count and
id; in a cluster the same dict of the topic's partitions in the metadata cache, which each UpdateMetadata
naming the topic replaces; on one broker the same count of changes to the topic's partitions). Built and
encoded at every request it had held the event loop for every other client: 882 ms at 50,000 until
2026-11-30, 146-179 ms after the answer's partitions went to the encoder as tuples and the collector was paused
while it was built, 3.5-3.9 ms kept (ad hoc, three runs of the median of 5). The first answer after a change
builds again the entries the change touched: a topic created beside the 50,000 partitions, 5.1-7.2 ms.

The second table: the 50,000 partitions then get a record each (librdkafka, one producer), and the broker is
stopped cleanly and started, then killed with SIGKILL and started. Before 2026-11-30 these took 34.6 s and
35.0 s: the first start after writes created and fsynced a `leader-epoch-checkpoint` per partition (a clean
stop now writes it, under the stop's one `sync`), and a start after a crash emptied and rewrote every active
segment's two indexes, which on ext4 also flushes each truncated file when it is closed (they are now rewritten
only if they come out different); five globs per partition folder where one listing does were a third of the
rest.

The third table: 10,000 topics of one partition, named `orders_N`, created 50 at a time; the broker's CPU per
Metadata v12 naming one topic (asked one after another for 3 s after a second's warm-up, as the small-request
table's rows); restart as above. Before 2026-12-01 each change
rewrote the whole metadata file (a change is now a journal line, folded into the file now and then) and each
Metadata request built a map of every topic's id: on the same hour 3,000 such topics took 54.4 s to create
(8.3 s after), the 2,500th to 3,000th 33 ms each, and a one-topic Metadata cost 560 µs (240 µs after; 5,210
µs against 210 µs at 10,000 topics)."""


SECURITY_NOTE = """

One broker with both listeners; the same 1 KiB records through each. Over SASL_SSL every byte is encrypted
and decrypted by Python's `ssl` (OpenSSL, AES-GCM) on the broker's event loop, and a fetch can no longer be
answered with `sendfile` from the page cache: the records are read into memory and written through the TLS
transport. SASL itself costs one exchange per connection (and per `connections.max.reauth.ms`), nothing per
request."""


def write_doc(result: str, args) -> None:
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    existing = open(path).read() if os.path.exists(path) else ""
    marker = "<!-- profile -->"
    profile = existing[existing.index(marker):] if marker in existing else ""
    doc = f"""# Benchmarks

Produced by `make bench` (`python -m bench.run`) on {datetime.date.today().isoformat()}, one run, all brokers
side by side. Machine: {machine()}.

Load generator: librdkafka's `rdkafka_performance` (Debian `librdkafka-dev` example, built against the
librdkafka {loadgen_version()} inside the confluent-kafka wheel with `bench/rdkafka_shim`), `linger.ms=5`,
{PARTITIONS} partitions. Produce: `rdkafka_performance -P -t T -s SIZE -c COUNT -a ACKS -X linger.ms=5`;
fetch: `rdkafka_performance -C -t T -p 0 .. -p 5 -o beginning -c COUNT`. Records per run: {', '.join(
        f'{int(c * args.scale):,} of {s} B' for s, c in SCENARIOS)}; each cell is the median of {REPEATS} runs.

{result}

{profile}"""
    with open(path, "w") as f:
        f.write(doc.rstrip() + "\n")
    print(f"wrote {path}")


def splice(section: str, title: str, suite: str) -> None:
    """``--suite replication`` or ``spark`` rewrites only that section of the doc (its table is its own run)."""
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    doc = open(path).read()
    marker = "<!-- profile -->"
    end = doc.index(marker)
    start = doc.find(f"## {title}\n", 0, end)
    if start >= 0:   # the section runs to the next one, or to the profile marker
        following = doc.find("\n## ", start + 1, end)
        head, tail = doc[:start], doc[following + 1 if following >= 0 else end:]
    else:
        head, tail = doc[:end], doc[end:]
    stamp = f"\n\n({title} rows: {datetime.date.today().isoformat()}, `make bench SUITE={suite}`.)"
    with open(path, "w") as f:
        f.write(head.rstrip() + "\n\n" + section.strip() + stamp + "\n\n" + tail)
    print(f"wrote {path}")


def loadgen_version() -> str:
    import confluent_kafka

    return confluent_kafka.libversion()[0]


if __name__ == "__main__":
    sys.exit(main())
