"""CreateAcls: add ACL bindings (needs Alter on the cluster; SECURITY_DISABLED without an authorizer)."""

from collections import defaultdict

from kbroker.protocol.acls import ALTER, AclBinding, InvalidAcl
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.create_acls import CREATE_ACLS as API  # noqa: F401  (the registry reads API)


def refusal(ctx, operation: int) -> tuple[ErrorCode, str] | None:
    """Why no ACL API may run for this request (shared by the three of them)."""
    if ctx.broker.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, "No Authorizer is configured."
    if not ctx.cluster_authorized(operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ctx.needs(operation)
    return None


async def handle(ctx, request):
    refused = refusal(ctx, ALTER)
    if refused:
        return {"throttle_time_ms": 0, "results": [{"error_code": refused[0], "error_message": refused[1]}
                                                   for _ in request.creations]}
    results: list[dict] = []
    by_resource: dict[tuple, set[AclBinding]] = defaultdict(set)
    for c in request.creations:
        acl = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                         c.operation, c.permission_type)
        try:
            acl.validate()
        except InvalidAcl as exc:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc)})
            continue
        by_resource[acl.resource].add(acl)
        results.append({"error_code": 0, "error_message": "", "resource": acl.resource})   # ("" as Kafka's)
    failed: dict[tuple, str] = {}
    for resource, added in by_resource.items():
        try:
            await ctx.broker.admin.change_acls(resource, added, set())
            ctx.log.info("acls_created", acls=[a.describe() for a in added], resource=str(resource))
        except Exception as exc:   # the store did not take it (ZooKeeper away past request.timeout.ms)
            ctx.log.warning("acls_create_failed", resource=str(resource), error=repr(exc))
            failed[resource] = f"ACLs not stored: {exc!r}"
    for r in results:
        resource = r.pop("resource", None)
        if resource in failed:
            r.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=failed[resource])
    return {"throttle_time_ms": 0, "results": results}
