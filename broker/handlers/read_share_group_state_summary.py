"""ReadShareGroupStateSummary (KIP-932): a share partition's start offset and epochs, and (v1) how many of its
in-flight records are done, without the records' states."""

from kbroker.broker.handlers.share_state_common import answer_each
from kbroker.protocol.messages.share_group_state import READ_SHARE_GROUP_STATE_SUMMARY as API  # noqa: F401


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator

    def summary(key, p):
        error, state = coordinator.read(key, p.leader_epoch)
        if error or state is None:
            return {"error_code": error, "error_message": None, "state_epoch": -1, "leader_epoch": -1,
                    "start_offset": -1, "delivery_complete_count": -1}
        return {"error_code": 0, "error_message": None, "state_epoch": state.state_epoch,
                "leader_epoch": state.leader_epoch, "start_offset": state.start_offset,
                "delivery_complete_count": state.delivery_complete_count()}
    return answer_each(ctx, request, summary, replicate=False)
