"""DeleteShareGroupState (KIP-932): a share partition's state removed from the share coordinator."""

from kbroker.broker.handlers.share_state_common import answer_each
from kbroker.protocol.messages.share_group_state import DELETE_SHARE_GROUP_STATE as API  # noqa: F401


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator
    return answer_each(ctx, request, lambda key, p: {"error_code": coordinator.delete(key), "error_message": None},
                       replicate=True)
