"""DelayedProduce: an acks=all produce waiting until the ISR has its batches.

Completes when, for every partition written, the high watermark has passed
the last appended offset (the whole ISR has it), or the partition's leader
moved (NOT_LEADER_OR_FOLLOWER), or the request timeout passed
(REQUEST_TIMED_OUT). A batch that reached the high watermark while the ISR
had shrunk below ``min.insync.replicas`` is NOT_ENOUGH_REPLICAS_AFTER_APPEND,
as in Kafka.
"""

from __future__ import annotations

from kbroker.broker.partitions.purgatory import DelayedOperation
from kbroker.protocol.errors import ErrorCode


class DelayedProduce(DelayedOperation):
    def __init__(self, manager, waiting: dict[tuple[str, int], tuple[int, dict]], response: dict,
                 timeout_ms: int) -> None:
        """``waiting``: (topic, partition) -> (offset the HW must reach, that partition's response entry)."""
        super().__init__(timeout_ms)
        self.manager = manager
        self.waiting = dict(waiting)
        self.response = response

    def _fail(self, entry: dict, error: ErrorCode) -> None:
        entry["error_code"] = error
        if "base_offset" in entry:   # a produce response's partition (others wait here too: markers, coordinators)
            entry.update(base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)

    def try_complete(self) -> bool:
        for tp, (required, entry) in list(self.waiting.items()):
            partition = self.manager.get(*tp)
            if partition is None:   # the replica left (deleted): NOT_LEADER_OR_FOLLOWER if it lives elsewhere
                self._fail(entry, self.manager.missing_error(*tp))
            elif not partition.is_leader:
                self._fail(entry, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif partition.log.high_watermark >= required:
                if len(partition.isr) < partition.min_isr:
                    self._fail(entry, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            else:
                continue
            del self.waiting[tp]
        if not self.waiting:
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        for _, entry in self.waiting.values():
            self._fail(entry, ErrorCode.REQUEST_TIMED_OUT)
        self.waiting.clear()

    def on_complete(self) -> dict:
        return self.response
