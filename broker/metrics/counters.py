"""What the request path counts for the metrics: plain integers and bucket arrays, no locks, no library calls.

Invariant: the hot path only adds to dicts and lists here (a handful of
operations per request); the Prometheus collector turns them into metric
families when scraped, on the event loop thread, so nothing is read while it
changes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

# Request time buckets in ms, as a Prometheus histogram's upper bounds (le).
BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
              10000.0, 30000.0)
PHASES = ("queue", "local", "remote", "response_send", "total")


class Histogram:
    __slots__ = ("counts", "total", "count")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_MS) + 1)   # the last one is +Inf
        self.total = 0.0
        self.count = 0

    def observe(self, value_ms: float) -> None:
        self.counts[bisect_left(BUCKETS_MS, value_ms)] += 1
        self.total += value_ms
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, n in zip((*(str(b) for b in BUCKETS_MS), "+Inf"), self.counts):
            running += n
            out.append((bound, running))
        return out


class TopicCounters:
    __slots__ = ("bytes_in", "messages_in", "bytes_out", "produce_requests", "fetch_requests", "failed_produce",
                 "failed_fetch", "bytes_rejected")

    def __init__(self) -> None:
        self.bytes_in = self.messages_in = self.bytes_out = 0
        self.produce_requests = self.fetch_requests = self.failed_produce = self.failed_fetch = 0
        self.bytes_rejected = 0


class BrokerCounters:
    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = defaultdict(TopicCounters)
        self.replication_bytes_out = 0
        self.idle_fetches_held = 0   # followers' idle fetches answered from their connections' callbacks
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.errors: dict[tuple[str, str], int] = defaultdict(int)   # (api, error name) of failed requests
        self.times: dict[str, dict[str, Histogram]] = {}

    def request_done(self, api: str, version: int, read: float, started: float, local_done: float,
                     ready: float, sent: float) -> None:
        """One answered request: its phases in seconds from ``time.perf_counter`` (Kafka's RequestMetrics:
        queue = read to handler start, local = the handler, remote = waiting in a purgatory, response_send)."""
        self.requests[(api, version)] += 1
        phases = self.times.get(api)
        if phases is None:
            phases = self.times[api] = {p: Histogram() for p in PHASES}
        phases["queue"].observe((started - read) * 1000)
        phases["local"].observe((local_done - started) * 1000)
        phases["remote"].observe((ready - local_done) * 1000)
        phases["response_send"].observe((sent - ready) * 1000)
        phases["total"].observe((sent - read) * 1000)
