"""WriteShareGroupState (KIP-932): a share partition's leader writes its state after each change it answers;
a write from an older leader epoch or state epoch is fenced."""

from kbroker.broker.handlers.share_state_common import answer_each
from kbroker.protocol.messages.share_group_state import WRITE_SHARE_GROUP_STATE as API  # noqa: F401


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator
    return answer_each(ctx, request, lambda key, p: {
        "error_code": coordinator.write(key, p.state_epoch, p.leader_epoch, p.start_offset,
                                        [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                         for b in p.state_batches]), "error_message": None}, replicate=True)
