"""ReadShareGroupState (KIP-932): a share partition's state, read by its leader when it loads it (state epoch
-1 when it was never initialized)."""

from kbroker.broker.handlers.share_state_common import answer_each
from kbroker.protocol.messages.share_group_state import READ_SHARE_GROUP_STATE as API  # noqa: F401


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator

    def read(key, p):
        error, state = coordinator.read(key, p.leader_epoch)
        if error or state is None:
            return {"error_code": error, "error_message": None, "state_epoch": -1, "start_offset": -1,
                    "state_batches": []}
        return {"error_code": 0, "error_message": None, "state_epoch": state.state_epoch,
                "start_offset": state.start_offset,
                "state_batches": [{"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
                                  for f, la, s, c in state.batches]}
    return answer_each(ctx, request, read, replicate=False)
