"""``kbroker acls add|list|remove``: ACLs through CreateAcls / DescribeAcls / DeleteAcls, in the style of
``kafka-acls``.

``add`` makes one binding per principal, host and operation on the resource
given (``--topic``, ``--group``, ``--transactional-id`` or ``--cluster``);
``remove`` deletes exactly those bindings; ``list`` prints the bindings
matching the resource and ``--principal`` given (all of them without).
"""

from __future__ import annotations

from kbroker.protocol import acls
from kbroker.protocol.errors import ErrorCode

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31


def _resources(args) -> list[tuple[int, str]]:
    found = [(acls.TOPIC, t) for t in args.topic or []] + [(acls.GROUP, g) for g in args.group or []]
    found += [(acls.TRANSACTIONAL_ID, t) for t in args.transactional_id or []]
    if args.cluster:
        found.append((acls.CLUSTER, acls.CLUSTER_NAME))
    return found


def _bindings(args, pattern: int) -> list[dict]:
    """The (allow and deny) bindings the command line names, as CreateAcls creations."""
    operations = [acls.operation_code(o) for o in args.operation or ["All"]]
    entries = [(p, h, acls.ALLOW) for p in args.allow_principal or [] for h in args.allow_host or ["*"]]
    entries += [(p, h, acls.DENY) for p in args.deny_principal or [] for h in args.deny_host or ["*"]]
    return [{"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern, "principal": p,
             "host": h, "operation": op, "permission_type": permission}
            for rtype, name in _resources(args) for p, h, permission in entries for op in operations]


def _line(rtype: int, name: str, pattern: int, entry) -> str:
    return (f"{acls.RESOURCE_TYPES.get(rtype, rtype)}:{acls.PATTERN_TYPES.get(pattern, pattern)}:{name}\t"
            f"(principal={entry.principal}, host={entry.host}, "
            f"operation={acls.OPERATIONS.get(entry.operation, entry.operation).upper()}, "
            f"permissionType={acls.PERMISSIONS.get(entry.permission_type, entry.permission_type).upper()})")


async def acls_tool(conn, args) -> int:
    """Returns the exit code; prints one line per binding listed, created or removed."""
    pattern = acls.pattern_code(args.resource_pattern_type or ("any" if args.action == "list" else "literal"))
    if args.action == "list":
        resources = _resources(args) or [(acls.ANY, None)]
        failed = False
        for rtype, name in resources:
            response = await conn.request(DESCRIBE_ACLS, 1, {
                "resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": pattern,
                "principal_filter": args.principal, "host_filter": None, "operation": acls.ANY,
                "permission_type": acls.ANY})
            if response.error_code:
                print(f"error {ErrorCode(response.error_code).name}: {response.error_message}")
                failed = True
            for r in response.resources:
                for entry in r.acls:
                    print(_line(r.resource_type, r.resource_name, r.pattern_type, entry))
        return 1 if failed else 0
    if pattern not in acls.PATTERN_TYPES:
        print("kbroker: acls add and remove need --resource-pattern-type literal or prefixed")
        return 1
    bindings = _bindings(args, pattern)
    if not bindings:
        print("kbroker: acls add and remove need a resource (--topic, --group, --transactional-id, --cluster) "
              "and --allow-principal or --deny-principal")
        return 1
    if args.action == "add":
        response = await conn.request(CREATE_ACLS, 1, {"creations": bindings})
        for b, result in zip(bindings, response.results):
            what = _line(b["resource_type"], b["resource_name"], pattern, _Entry(b))
            print(f"{what}\t" + (f"error {ErrorCode(result.error_code).name}: {result.error_message}"
                                 if result.error_code else "added"))
        return 1 if any(r.error_code for r in response.results) else 0
    filters = [{"resource_type_filter": b["resource_type"], "resource_name_filter": b["resource_name"],
                "pattern_type_filter": pattern, "principal_filter": b["principal"], "host_filter": b["host"],
                "operation": b["operation"], "permission_type": b["permission_type"]} for b in bindings]
    response = await conn.request(DELETE_ACLS, 1, {"filters": filters})
    failed = False
    for result in response.filter_results:
        if result.error_code:
            print(f"error {ErrorCode(result.error_code).name}: {result.error_message}")
            failed = True
        for m in result.matching_acls:
            print(_line(m.resource_type, m.resource_name, m.pattern_type, _Entry(m)) + "\tremoved")
            failed = failed or bool(m.error_code)
    return 1 if failed else 0


class _Entry:
    """A creation or a matching ACL seen through DescribeAcls' field names, for ``_line``."""

    def __init__(self, b) -> None:
        get = b.get if isinstance(b, dict) else lambda k: getattr(b, k)
        self.principal, self.host = get("principal"), get("host")
        self.operation, self.permission_type = get("operation"), get("permission_type")
