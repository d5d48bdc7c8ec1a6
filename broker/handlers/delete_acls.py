"""DeleteAcls: remove every ACL binding each filter matches and report them (needs Alter on the cluster)."""

from collections import defaultdict

from kbroker.broker.handlers.create_acls import refusal
from kbroker.protocol.acls import ALTER, AclFilter, InvalidAcl
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.delete_acls import DELETE_ACLS as API  # noqa: F401  (the registry reads API)


def _matching(acl, error: int = 0, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "resource_type": acl.resource_type,
            "resource_name": acl.name, "pattern_type": acl.pattern_type, "principal": acl.principal,
            "host": acl.host, "operation": acl.operation, "permission_type": acl.permission}


async def handle(ctx, request):
    refused = refusal(ctx, ALTER)
    if refused:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": refused[0], "error_message": refused[1], "matching_acls": []} for _ in request.filters]}
    authorizer = ctx.broker.authorizer
    matched: list = []   # per filter: its matching bindings, or (error, message)
    removing: dict[tuple, set] = defaultdict(set)
    for f in request.filters:
        acl_filter = AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                               f.principal_filter, f.host_filter, f.operation, f.permission_type)
        try:
            acl_filter.validate()
        except InvalidAcl as exc:
            matched.append((ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        found = authorizer.bindings(acl_filter)
        matched.append(found)
        for acl in found:
            removing[acl.resource].add(acl)
    failed: dict[tuple, str] = {}
    for resource, removed in removing.items():
        try:
            await ctx.broker.admin.change_acls(resource, set(), removed)
            ctx.log.info("acls_deleted", acls=[a.describe() for a in removed], resource=str(resource))
        except Exception as exc:   # the store did not take it (ZooKeeper away past request.timeout.ms)
            ctx.log.warning("acls_delete_failed", resource=str(resource), error=repr(exc))
            failed[resource] = f"ACLs not deleted: {exc!r}"
    results = []
    for found in matched:
        if isinstance(found, tuple):
            results.append({"error_code": found[0], "error_message": found[1], "matching_acls": []})
            continue
        results.append({"error_code": 0, "error_message": None, "matching_acls": [
            _matching(a, ErrorCode.UNKNOWN_SERVER_ERROR, failed[a.resource]) if a.resource in failed else _matching(a)
            for a in found]})
    return {"throttle_time_ms": 0, "filter_results": results}
