"""WriteShareGroupState (KIP-932): a share partition's leader writes its state after each change it answers;
a write from an older leader epoch or state epoch is fenced, and one to a share partition whose state was never
initialized (or was deleted) is INVALID_REQUEST, with Kafka's words; so are a negative partition, and a topic id
or partition the cluster does not have (UNKNOWN_TOPIC_OR_PARTITION)."""

from kbroker.broker.handlers.share_state_common import answer_each, negative, refused, unknown
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.share_group_state import WRITE_SHARE_GROUP_STATE as API  # noqa: F401

UNINITIALIZED = "Write operation on uninitialized share partition not allowed."


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator

    def write(key, p) -> dict:
        early = negative(key)
        if early:
            return early
        if coordinator.states.get(key) is None:
            return refused(ErrorCode.INVALID_REQUEST, UNINITIALIZED)
        late = unknown(ctx.broker, key)   # (Kafka checks the epochs first: a rare tie, the topic deleted since)
        if late:
            return late
        error = coordinator.write(key, p.state_epoch, p.leader_epoch, p.start_offset,
                                  [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                   for b in p.state_batches])
        return {"error_code": error, "error_message": None}
    return answer_each(ctx, request, write, replicate=True)
