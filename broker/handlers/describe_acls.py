"""DescribeAcls: the ACL bindings a filter matches, grouped by resource pattern (needs Describe on the cluster)."""

from collections import defaultdict

from kbroker.broker.handlers.create_acls import refusal
from kbroker.protocol.acls import DESCRIBE, PREFIXED, AclFilter, InvalidAcl
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_acls import DESCRIBE_ACLS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    refused = refusal(ctx, DESCRIBE)
    if refused:
        return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1], "resources": []}
    acl_filter = AclFilter(request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
                           request.principal_filter, request.host_filter, request.operation, request.permission_type)
    if request.pattern_type_filter > PREFIXED:   # (a code Kafka does not know: a filter that matches nothing)
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "resources": []}
    try:
        acl_filter.validate()
    except InvalidAcl as exc:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc),
                "resources": []}
    grouped = defaultdict(list)
    for acl in ctx.broker.authorizer.bindings(acl_filter):
        grouped[acl.resource].append(acl)
    # (an empty message, not none: the field's default in Kafka's answer)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "resources": [
        {"resource_type": rtype, "resource_name": name, "pattern_type": ptype,
         "acls": [{"principal": a.principal, "host": a.host, "operation": a.operation,
                   "permission_type": a.permission} for a in sorted(found, key=_order)]}
        for (rtype, ptype, name), found in sorted(grouped.items())]}


def _order(acl) -> tuple:
    return acl.principal, acl.host, acl.operation, acl.permission
