"""WriteShareGroupState (KIP-932): a share partition's leader writes the batches its answers changed; the share
coordinator joins them to the state it has. Refused as Kafka's share coordinator refuses a write, in its order
and words: a negative partition, a share partition whose state was never initialized (or was deleted), an older
leader epoch than one its state was read at, an older state epoch, and a topic id or partition the cluster does
not have (UNKNOWN_TOPIC_OR_PARTITION)."""

from kbroker.broker.handlers.share_state_common import answer_each, negative, refused, unknown
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.share_group_state import WRITE_SHARE_GROUP_STATE as API  # noqa: F401

UNINITIALIZED = "Write operation on uninitialized share partition not allowed."


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator

    def write(key, p) -> dict:
        early = negative(key)
        if early:
            return early
        error = coordinator.write_refusal(key, p.state_epoch, p.leader_epoch)
        if error:
            return refused(error, UNINITIALIZED if error == ErrorCode.INVALID_REQUEST else kafka_message(error))
        late = unknown(ctx.broker, key)
        if late:
            return late
        error = coordinator.write(key, p.state_epoch, p.leader_epoch, p.start_offset,
                                  [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                   for b in p.state_batches], p.delivery_complete_count)
        return {"error_code": error, "error_message": None}
    return answer_each(ctx, request, write, replicate=True)
