"""Kafka's ACL model: resource patterns, access control entries and the filters that select them.

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an
entry (principal ``User:<name>`` or ``User:*``, host or ``*``, operation,
ALLOW or DENY). The numeric codes are Kafka's (``AclOperation``,
``AclPermissionType``, ``ResourceType``, ``PatternType``) because they go on
the wire; the names are the ones Kafka writes into ZooKeeper and prints.
A filter's ``None`` name, principal or host and its ANY codes match
everything; pattern type MATCH selects the patterns that would apply to a
named resource (the literal name, the literal ``*`` and every prefix of it).
"""

from __future__ import annotations

from dataclasses import dataclass

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

# ResourceType
UNKNOWN, ANY = 0, 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = {TOPIC: "Topic", GROUP: "Group", CLUSTER: "Cluster", TRANSACTIONAL_ID: "TransactionalId",
                  DELEGATION_TOKEN: "DelegationToken", USER: "User"}

# PatternType
MATCH, LITERAL, PREFIXED = 2, 3, 4
PATTERN_TYPES = {LITERAL: "LITERAL", PREFIXED: "PREFIXED"}

# AclOperation
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS = \
    9, 10, 11, 12, 13, 14
OPERATIONS = {ALL: "All", READ: "Read", WRITE: "Write", CREATE: "Create", DELETE: "Delete", ALTER: "Alter",
              DESCRIBE: "Describe", CLUSTER_ACTION: "ClusterAction", DESCRIBE_CONFIGS: "DescribeConfigs",
              ALTER_CONFIGS: "AlterConfigs", IDEMPOTENT_WRITE: "IdempotentWrite", CREATE_TOKENS: "CreateTokens",
              DESCRIBE_TOKENS: "DescribeTokens"}

# AclPermissionType
DENY, ALLOW = 2, 3
PERMISSIONS = {DENY: "Deny", ALLOW: "Allow"}

# An ALLOW of one of these grants DESCRIBE (DESCRIBE_CONFIGS) too; a DENY implies nothing.
IMPLIES_DESCRIBE = frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS})


class InvalidAcl(ValueError):
    """An ACL or filter Kafka refuses with INVALID_REQUEST; the message says why."""


def _by_name(table: dict[int, str], text: str, what: str) -> int:
    for code, name in table.items():
        if name.lower() == text.replace("_", "").lower() or name.lower() == text.lower():
            return code
    raise InvalidAcl(f"unknown {what} {text!r}")


def resource_type_code(text: str) -> int:
    return ANY if text.lower() == "any" else _by_name(RESOURCE_TYPES, text, "resource type")


def operation_code(text: str) -> int:
    return ANY if text.lower() == "any" else _by_name(OPERATIONS, text, "operation")


def permission_code(text: str) -> int:
    return ANY if text.lower() == "any" else _by_name(PERMISSIONS, text, "permission type")


def pattern_code(text: str) -> int:
    table = {ANY: "ANY", MATCH: "MATCH", **PATTERN_TYPES}
    return _by_name(table, text, "pattern type")


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    @property
    def resource(self) -> tuple[int, int, str]:
        return self.resource_type, self.pattern_type, self.name

    def validate(self) -> None:
        """Raise InvalidAcl unless Kafka would store this binding (AclControlManager / AclApis' checks). An
        empty host is stored, as Kafka 4.2 stores it: it matches no caller."""
        if self.resource_type not in RESOURCE_TYPES:
            raise InvalidAcl(f"Invalid resourceType {_refused_name(self.resource_type)}")
        if self.pattern_type not in PATTERN_TYPES:
            raise InvalidAcl(f"Invalid patternType {_refused_name(self.pattern_type, pattern=True)}")
        if self.operation not in OPERATIONS:
            raise InvalidAcl(f"Invalid operation {_refused_name(self.operation)}")
        if self.permission not in PERMISSIONS:
            raise InvalidAcl(f"Invalid permissionType {_refused_name(self.permission)}")
        if not self.name:
            raise InvalidAcl("Invalid empty resource name")
        if self.resource_type == CLUSTER and self.name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if ":" not in self.principal:   # (an empty type or name is taken, as Kafka takes it)
            raise InvalidAcl(f"Could not parse principal from `{self.principal}` (no colon is present separating "
                             "the principal type from the principal name)")

    def entry_json(self) -> dict:
        return {"principal": self.principal, "permissionType": PERMISSIONS[self.permission],
                "operation": OPERATIONS[self.operation], "host": self.host}

    def describe(self) -> str:
        """Kafka's text form, as ``kafka-acls --list`` prints it."""
        return (f"(principal={self.principal}, host={self.host}, operation={OPERATIONS[self.operation].upper()}, "
                f"permissionType={PERMISSIONS[self.permission].upper()})")


def _refused_name(code: int, pattern: bool = False) -> str:
    """How Kafka names a code no binding may hold: its enum's name (a filter's ANY or MATCH), UNKNOWN for the
    rest (a code it does not know reads as UNKNOWN)."""
    return "ANY" if code == ANY else "MATCH" if pattern and code == MATCH else "UNKNOWN"


@dataclass(frozen=True, slots=True)
class AclFilter:
    resource_type: int = ANY
    name: str | None = None
    pattern_type: int = ANY
    principal: str | None = None
    host: str | None = None
    operation: int = ANY
    permission: int = ANY

    def validate(self) -> None:
        if self.resource_type == UNKNOWN or self.pattern_type == UNKNOWN or self.operation == UNKNOWN \
                or self.permission == UNKNOWN:
            raise InvalidAcl("The filter has an UNKNOWN element")
        if self.pattern_type not in (ANY, MATCH, LITERAL, PREFIXED):
            raise InvalidAcl(f"Invalid patternType {self.pattern_type}")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ANY and self.resource_type != acl.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and (self.operation == ANY or self.operation == acl.operation)
                and (self.permission == ANY or self.permission == acl.permission))

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.pattern_type == MATCH:
            if self.name is None:
                return True
            if acl.pattern_type == LITERAL:
                return acl.name == self.name or acl.name == WILDCARD
            return self.name.startswith(acl.name)
        if self.pattern_type != ANY and self.pattern_type != acl.pattern_type:
            return False
        return self.name is None or self.name == acl.name


def binding_from_json(data: dict) -> AclBinding:
    """The local store's form: one flat object per ACL."""
    return AclBinding(resource_type_code(data["resourceType"]), data["name"], pattern_code(data["patternType"]),
                      data["principal"], data["host"], operation_code(data["operation"]),
                      permission_code(data["permissionType"]))


def binding_to_json(acl: AclBinding) -> dict:
    return {"resourceType": RESOURCE_TYPES[acl.resource_type], "name": acl.name,
            "patternType": PATTERN_TYPES[acl.pattern_type], **acl.entry_json()}
