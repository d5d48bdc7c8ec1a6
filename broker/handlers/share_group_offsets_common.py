"""What AlterShareGroupOffsets and DeleteShareGroupOffsets check first: the group is an empty share group this
broker coordinates (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP otherwise, as Kafka answers)."""

from kbroker.broker.handlers.common import coordinator_error
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.protocol.acls import DELETE, READ
from kbroker.protocol.errors import ErrorCode


def empty_share_group(ctx, group_id: str, deleting: bool = False):
    """(error, the group); altering the offsets of no group makes it, as Kafka 4.2 does."""
    error = coordinator_error(ctx, group_id, DELETE if deleting else READ, refuse_empty_id=True)
    if error:
        return error, None
    coordinator = ctx.broker.group_coordinator
    group = coordinator.groups.get(group_id)
    if group is None and not deleting:
        return coordinator.create_share_group(group_id)
    if not isinstance(group, ShareGroup):
        return ErrorCode.GROUP_ID_NOT_FOUND, None
    if not group.is_empty:
        return ErrorCode.NON_EMPTY_GROUP, None
    return ErrorCode.NONE, group
