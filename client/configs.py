"""``kbroker configs describe|alter``: configs of a topic, a broker or (``--entity-default``) every broker's
dynamic default, in the style of ``kafka-configs``.

``describe`` prints each config with its value and source; ``alter`` applies ``--add-config k=v,k2=v2``
and ``--delete-config k,k2`` with IncrementalAlterConfigs (SET and DELETE), so that configs not named stay.
"""

from __future__ import annotations

from kbroker.protocol.errors import ErrorCode

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
RESOURCE_TYPES = {"topics": 2, "brokers": 4, "broker-loggers": 8}
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
SET, DELETE = 0, 1


def parse_assignments(text: str | None) -> list[tuple[str, str]]:
    """``k=v,k2=v2`` (a value may hold commas inside square brackets, as kafka-configs allows: ``k=[a,b]``)."""
    if not text:
        return []
    out, depth, current = [], 0, ""
    for ch in text + ",":
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            if current.strip():
                key, sep, value = current.partition("=")
                if not sep:
                    raise ValueError(f"expected key=value, got {current!r}")
                out.append((key.strip(), value.strip().removeprefix("[").removesuffix("]")))
            current = ""
        else:
            current += ch
    return out


async def configs_tool(conn, args) -> int:
    resource_type = RESOURCE_TYPES[args.entity_type]
    name = "" if getattr(args, "entity_default", False) else (args.entity_name or "")
    if not name and args.entity_type == "topics":
        print("kbroker: configs for topics need --entity-name")
        return 1
    if args.action == "describe":
        response = await conn.request(DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
        failed = False
        for result in response.results:
            if result.error_code:
                print(f"error {ErrorCode(result.error_code).name}: {result.error_message}")
                failed = True
                continue
            print(f"Configs for {args.entity_type[:-1]} '{result.resource_name}':" if result.resource_name
                  else "Default configs for brokers in the cluster:")
            for c in sorted(result.configs, key=lambda c: c.name):
                if args.all or c.config_source not in (5,):   # kafka-configs shows what is set unless --all
                    print(f"  {c.name}={c.value if not c.is_sensitive else '(sensitive)'} "
                          f"({SOURCES.get(c.config_source, c.config_source)}"
                          f"{', read-only' if c.read_only else ''})")
        return 1 if failed else 0
    try:
        ops = [{"name": k, "config_operation": SET, "value": v} for k, v in parse_assignments(args.add_config)]
    except ValueError as exc:
        print(f"kbroker: {exc}")
        return 1
    ops += [{"name": k.strip(), "config_operation": DELETE, "value": None}
            for k in (args.delete_config or "").split(",") if k.strip()]
    if not ops:
        print("kbroker: configs alter needs --add-config or --delete-config")
        return 1
    response = await conn.request(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": resource_type, "resource_name": name, "configs": ops}], "validate_only": False})
    for r in response.responses:
        if r.error_code:
            print(f"error {ErrorCode(r.error_code).name}: {r.error_message}")
            return 1
    what = f"config for {args.entity_type[:-1]} {name}" if name else "default config for brokers in the cluster"
    print(f"Completed updating {what}.")
    return 0
