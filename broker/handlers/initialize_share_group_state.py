"""InitializeShareGroupState (KIP-932): a share partition's first state, written by its leader."""

from kbroker.broker.handlers.share_state_common import answer_each
from kbroker.protocol.messages.share_group_state import INITIALIZE_SHARE_GROUP_STATE as API  # noqa: F401


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator
    return answer_each(ctx, request, lambda key, p: {
        "error_code": coordinator.initialize(key, p.state_epoch, p.start_offset), "error_message": None},
        replicate=True)
