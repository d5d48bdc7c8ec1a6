"""The kbroker source: batch (``spark.read``) and streaming (``spark.readStream``) readers.

Offsets are Spark's JSON, ``{"topic": {"partition": next offset}}``,
checkpointed by Spark and never committed to a consumer group. A
micro-batch is one input partition per topic-partition (split further for
``minPartitions``), always in the same order for the same offsets, so a
replayed batch has the same tasks. Partitions that appear in a subscribed
topic are read from their earliest offset.

The readers hold no connection when pickled: the driver-side consumer is
made on first use in the process that plans, records are read by
``read_range`` on the executors.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from kbroker.client.spark import kafka
from kbroker.client.spark.options import LATEST, SourceOptions
from kbroker.client.spark.records import OffsetRange, read_range, split

Offsets = dict[tuple[str, int], int]


def to_json(offsets: Offsets) -> dict:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(data: dict) -> Offsets:
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


class _Planner:
    """Driver-side offset lookups shared by both readers."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._consumer = None

    def __getstate__(self):
        return {**self.__dict__, "_consumer": None}

    @property
    def c(self):
        if self._consumer is None:
            self._consumer = kafka.consumer(self.opts.client, self.opts.read_committed)
        return self._consumer

    def partitions(self) -> list[tuple[str, int]]:
        return kafka.partitions_of(self.c, self.opts.client, self.opts.subscription, self.opts.api_timeout_s)

    def bounds(self, tps) -> dict[tuple[str, int], tuple[int, int]]:
        return kafka.watermarks(self.c, self.opts.client, tps, self.opts.api_timeout_s)

    def starting(self, tps, bounds) -> Offsets:
        """Where ``startingOffsets`` (or a starting timestamp) puts each partition, within its ``bounds``."""
        spec = self.opts.starting
        if spec.by_timestamp:
            wanted = {tp: spec.per_partition.get(tp, spec.default) for tp in tps}
            times = kafka.offsets_for_times(self.c, self.opts.client, {tp: ts for tp, ts in wanted.items()
                                                                        if ts >= 0}, self.opts.api_timeout_s)
            missed = sorted(tp for tp, ts in wanted.items() if ts >= 0 and times.get(tp) is None)
            if missed and not self.opts.timestamp_miss_latest:
                raise ValueError(
                    f"no record at or after the starting timestamp in {', '.join(f'{t}-{p}' for t, p in missed)} "
                    "(option 'startingTimestamp' / 'startingOffsetsByTimestamp'); set option "
                    "'startingOffsetsByTimestampStrategy' to latest to start those partitions at their end")
            return {tp: kafka.resolve(LATEST if times.get(tp) is None else times[tp], bounds[tp]) for tp in tps}
        return {tp: kafka.resolve(spec.for_partition(*tp), bounds[tp]) for tp in tps}

    def ranges(self, start: Offsets, end: Offsets) -> list[OffsetRange]:
        new = [tp for tp in end if tp not in start]
        earliest = {tp: b[0] for tp, b in self.bounds(new).items()} if new else {}
        ranges = [OffsetRange(t, p, start.get((t, p), earliest.get((t, p), 0)), end[(t, p)]) for t, p in sorted(end)]
        return split(ranges, self.opts.min_partitions)


class BatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.planner = _Planner(opts)

    def partitions(self):
        tps = self.planner.partitions()
        bounds = self.planner.bounds(tps)
        start = self.planner.starting(tps, bounds)
        end = {tp: kafka.resolve(self.opts.ending.for_partition(*tp), bounds[tp]) for tp in tps}
        for tp in tps:
            if start[tp] > end[tp]:
                raise ValueError(f"{tp[0]}-{tp[1]}: starting offset {start[tp]} is after ending offset {end[tp]} "
                                 "(options 'startingOffsets' / 'endingOffsets')")
        return self.planner.ranges(start, end)

    def read(self, partition: OffsetRange):
        return read_range(self.opts, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.planner = _Planner(opts)
        self.target: Offsets | None = None   # Trigger.AvailableNow: never past what was there at its start

    def initialOffset(self) -> dict:
        tps = self.planner.partitions()
        return to_json(self.planner.starting(tps, self.planner.bounds(tps)))

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {tp: high for tp, (_, high) in self._bounds().items()}

    def _bounds(self) -> dict[tuple[str, int], tuple[int, int]]:
        return self.planner.bounds(self.planner.partitions())

    def latestOffset(self, start: dict, limit) -> dict:
        begin = from_json(start)
        bounds = self._bounds()
        latest = {tp: high for tp, (_, high) in bounds.items()}
        if self.target is not None:
            latest = {tp: min(o, self.target[tp]) for tp, o in latest.items() if tp in self.target}
        # Partitions that appeared since: from their earliest offset.
        begin.update({tp: bounds[tp][0] for tp in latest if tp not in begin})
        end = {tp: max(o, begin.get(tp, o)) for tp, o in latest.items()}
        for tp, o in begin.items():
            end.setdefault(tp, o)   # a partition no longer subscribed keeps where it was
        if isinstance(limit, ReadMaxRows):
            end = _rate_limit(begin, end, limit.max_rows)
        return to_json(end)

    def partitions(self, start: dict, end: dict):
        return self.planner.ranges(from_json(start), from_json(end))

    def read(self, partition: OffsetRange):
        return read_range(self.opts, partition)

    def commit(self, end: dict) -> None:
        """Spark has checkpointed ``end``; the brokers are told nothing (no consumer group)."""


def _rate_limit(begin: Offsets, end: Offsets, max_rows: int) -> Offsets:
    """At most ``max_rows`` offsets in all, shared in proportion to what each partition has (Spark's rule)."""
    available = {tp: end[tp] - begin.get(tp, end[tp]) for tp in end}
    total = sum(available.values())
    if total <= max_rows:
        return end
    share = {tp: n * max_rows // total for tp, n in available.items()}
    left = max_rows - sum(share.values())
    for tp in sorted(available, key=lambda t: available[t] - share[t], reverse=True)[:left]:
        share[tp] += 1
    return {tp: begin.get(tp, end[tp]) + share[tp] for tp in end}
