"""DeleteShareGroupState (KIP-932): a share partition's state removed from the share coordinator. A negative
partition, and a topic id or partition the cluster does not have, are refused as Kafka's share coordinator
refuses them (a group's deletion takes the refusal for a topic deleted since as nothing left to do)."""

from kbroker.broker.handlers.share_state_common import answer_each, negative, unknown
from kbroker.protocol.messages.share_group_state import DELETE_SHARE_GROUP_STATE as API  # noqa: F401


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator
    return answer_each(ctx, request, lambda key, p: negative(key) or unknown(ctx.broker, key) or {
        "error_code": coordinator.delete(key), "error_message": None}, replicate=True)
