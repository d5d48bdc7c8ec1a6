"""What AlterShareGroupOffsets and DeleteShareGroupOffsets check first: the group is an empty share group this
broker coordinates (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP otherwise, as Kafka answers)."""

from kbroker.broker.handlers.common import coordinator_error
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.protocol.acls import DELETE, READ
from kbroker.protocol.error_messages import MESSAGES
from kbroker.protocol.errors import ErrorCode


def empty_share_group(ctx, group_id: str, deleting: bool = False):
    """(error, Kafka's words for it, the group); altering the offsets of no group makes it, as Kafka 4.2 does.
    Every refusal carries words: the error's own where Kafka has none of its own for it."""
    error = coordinator_error(ctx, group_id, DELETE if deleting else READ, refuse_empty_id=True)
    if error:
        return error, MESSAGES.get(error), None
    coordinator = ctx.broker.group_coordinator
    group = coordinator.groups.get(group_id)
    if group is None and not deleting:
        error, group = coordinator.create_share_group(group_id)
        return error, MESSAGES.get(error) if error else None, group
    if group is None:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
    if not isinstance(group, ShareGroup):
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
    if not group.is_empty:
        return ErrorCode.NON_EMPTY_GROUP, MESSAGES[ErrorCode.NON_EMPTY_GROUP], None
    return ErrorCode.NONE, None, group
