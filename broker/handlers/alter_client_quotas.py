"""AlterClientQuotas: set or remove quota keys of (user, client id) and IP entities, persisted and applied at once.

Checked as Kafka's controller checks them, in its order and words: a key given twice in an entry; an entity with
at least one component, each a user, client id or IP with a name that is not empty (a type given twice keeps its
last name, as Kafka's request reads the entity as a map); an IP never combined with the other two, naming an
address or a host that resolves; then each key set, of its entity's kind (a user's or client id's byte rates,
request percentage and mutation rate; an IP's connection_creation_rate), positive, within its type and whole
where that type is integral. Removing a key is never refused. One entry is answered per entity (a second entry
for it is refused), in the order of Kafka's results map."""

import math

from kbroker.broker.configuration.quotas import (CLIENT_KEYS, CONNECTION_RATE, FETCH, IP, IP_KEYS, PRODUCE, SLOTS,
                                                 entity_from_components)
from kbroker.broker.network.connection_limits import resolve
from kbroker.protocol.acls import ALTER_CONFIGS
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.alter_client_quotas import ALTER_CLIENT_QUOTAS as API  # noqa: F401
from kbroker.storage.java_order import hash_order, string_hash

# key -> (Kafka's type name, its largest value) where the type is integral
INTEGRAL = {PRODUCE: ("a LONG", 2**63 - 1), FETCH: ("a LONG", 2**63 - 1), CONNECTION_RATE: ("an INT", 2**31 - 1)}


def _entity(entry) -> dict[str, str | None]:
    """The entry's entity as Kafka's request reads it: a map of type to name, a type given twice keeping its
    last name (and its first place)."""
    entity: dict[str, str | None] = {}
    for component in entry.entity:
        entity[component.entity_type] = component.entity_name
    return entity


def _entity_text(entity: dict[str, str | None], components: int) -> str:
    """Java's ClientQuotaEntity.toString, in its hash map's order."""
    parts = [f"{kind}={'null' if entity[kind] is None else entity[kind]}"
             for kind in hash_order(entity, components)]
    return f"ClientQuotaEntity(entries={{{', '.join(parts)}}})"


async def _problem(entry) -> str | None:
    """Why Kafka's controller refuses the entry, in its words and order: a key given twice, the entity's types
    and names (in its hash map's order), their combination, then each key set (in its map's order)."""
    entity = _entity(entry)
    changes: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key in changes:
            return f"Ignoring duplicate entity {_entity_text(entity, len(entry.entity))}"
        changes[op.key] = None if op.remove else op.value
    if not entity:
        return "Invalid empty client quota entity"
    # (Kafka's maps are made with room for the components and the ops given: their sizes decide the order)
    for kind in hash_order(entity, len(entry.entity)):
        if kind not in SLOTS:
            return f"Unhandled client quota entity type: {kind}"
        if entity[kind] == "":
            return f"Empty {kind} not supported"
    keys = CLIENT_KEYS
    if IP in entity:
        if len(entity) > 1:
            return "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
        name = entity[IP]
        if name is not None and not await resolve(name):
            return f"{name} is not a valid IP or resolvable host."
        keys = IP_KEYS
    for key in hash_order(changes, len(entry.ops)):
        value = changes[key]
        if value is None:   # (a removal is never refused)
            continue
        if key not in keys:
            return f"Invalid configuration key {key}"
        if not value > 0:
            return f"Quota {key} must be greater than 0"
        if key in INTEGRAL:
            kind, largest = INTEGRAL[key]
            if value > float(largest):
                return f"Proposed value for {key} is too large for {kind}."
            if abs(math.fmod(value, 1.0)) > 1e-6:
                return f"{key} cannot be a fractional value."
    return None


async def handle(ctx, request):
    allowed = ctx.cluster_authorized(ALTER_CONFIGS)
    results: dict[frozenset, dict] = {}   # (one answer per entity, as Kafka's controller keys them)
    for entry in request.entries:
        entity = _entity(entry)
        key = frozenset(entity.items())
        echo = [{"entity_type": kind, "entity_name": entity[kind]} for kind in hash_order(entity, len(entry.entity))]
        problem = None if allowed else kafka_message(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        error = ErrorCode.NONE if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if allowed:
            problem = (f"Ignoring duplicate entity {_entity_text(entity, len(entry.entity))}" if key in results
                       else await _problem(entry))
            error = ErrorCode.INVALID_REQUEST if problem else ErrorCode.NONE
        if not problem and not request.validate_only:
            quota_entity = entity_from_components(list(entity.items()))
            values = dict(ctx.broker.quotas.configs.get(quota_entity, {}))
            for op in entry.ops:
                if op.remove:
                    values.pop(op.key, None)
                else:
                    values[op.key] = op.value
            await ctx.broker.admin.set_quotas(quota_entity, values)
            ctx.log.info("client_quotas_altered", entity=quota_entity, quotas=values)
        results[key] = {"error_code": error, "error_message": problem, "entity": echo}
    return {"throttle_time_ms": 0, "entries": [results[k] for k in _in_kafkas_order(results)]}


def _in_kafkas_order(results: dict[frozenset, dict]) -> list[frozenset]:
    """The entities as Kafka's answer lists them: its results map's order (a java.util.HashMap, each entity
    hashed as ClientQuotaEntity hashes: 31 plus the sum of each type's hash XOR its name's)."""
    def java_hash(entity: frozenset) -> int:   # (Objects.hash of the entries map: 31 + its hash)
        return 31 + sum(string_hash(k) ^ (string_hash(v) if v is not None else 0) for k, v in entity)
    return hash_order(results, hash_of=java_hash)
