"""ReadShareGroupStateSummary (KIP-932): a share partition's start offset and epochs, and (v1) how many of its
in-flight records are done, without the records' states. A negative partition, and a topic id or partition the
cluster does not have, are refused as Kafka's share coordinator refuses them; a state never initialized is no
error (start offset and delivery count -1)."""

from kbroker.broker.handlers.share_state_common import answer_each, negative, unknown
from kbroker.protocol.messages.share_group_state import READ_SHARE_GROUP_STATE_SUMMARY as API  # noqa: F401

# (Kafka's: a refusal's fields as its schema defaults them; a state never initialized as its PartitionFactory does)
REFUSED = {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "delivery_complete_count": -1}
UNINITIALIZED = {"state_epoch": 0, "leader_epoch": 0, "start_offset": -1, "delivery_complete_count": -1}


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator

    def summary(key, p):
        refusal = negative(key) or unknown(ctx.broker, key)
        if refusal:
            return {**refusal, **REFUSED}
        state = coordinator.states.get(key)   # (no leader epoch is checked or stored, as Kafka's summary)
        if state is None:
            return {"error_code": 0, "error_message": None, **UNINITIALIZED}
        return {"error_code": 0, "error_message": None, "state_epoch": state.state_epoch,
                "leader_epoch": state.leader_epoch, "start_offset": state.start_offset,
                "delivery_complete_count": state.delivery_complete_count}
    return answer_each(ctx, request, summary, replicate=False)
