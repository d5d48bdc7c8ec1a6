"""InitializeShareGroupState (KIP-932): a share partition's first state, written by the group coordinator before
it assigns the partition (start offset -1) or by AlterShareGroupOffsets. Refused, as Kafka's share coordinator
refuses it, for a negative partition, an older state epoch than the stored one, and a topic id or partition
the cluster does not have (in that order): no state is made for a partition that does not exist."""

from kbroker.broker.handlers.share_state_common import answer_each, negative, unknown
from kbroker.protocol.messages.share_group_state import INITIALIZE_SHARE_GROUP_STATE as API  # noqa: F401


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator

    def initialize(key, p) -> dict:
        state = coordinator.states.get(key)
        fenced = state is not None and 0 <= p.state_epoch < state.state_epoch
        return negative(key) or (None if fenced else unknown(ctx.broker, key)) or {
            "error_code": coordinator.initialize(key, p.state_epoch, p.start_offset), "error_message": None}
    return answer_each(ctx, request, initialize, replicate=True)
