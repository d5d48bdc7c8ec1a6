"""The authorizer: may this principal, from this host, do this operation on this resource?

Kafka's rules (``AclAuthorizer`` in ZooKeeper mode, ``StandardAuthorizer`` since):

* a principal in ``super.users`` may do anything;
* the ACLs that apply to a resource are those of its literal name, of the
  literal ``*`` of its type, and of every PREFIXED pattern its name starts with;
  of these, an ACL matches when its principal is the caller's or ``User:*``,
  its host the caller's address or ``*``, and its operation the one asked or
  ALL. An ALLOW of Read, Write, Delete or Alter also grants Describe, and of
  AlterConfigs also DescribeConfigs; a DENY implies nothing;
* any matching DENY refuses; else any matching ALLOW grants; else, when no
  ACL at all applies to the resource, ``allow.everyone.if.no.acl.found``
  decides (default false); else refused.

Invariant: ``_acls`` holds exactly the bindings of the metadata store
(ZooKeeper ``/kafka-acl*`` in a cluster, the local store otherwise), replaced
one resource pattern at a time so a reader never sees half a change.
Decisions are a handful of dict lookups: the Produce and Fetch paths ask per
topic on every request.
"""

from __future__ import annotations

from collections import defaultdict

import structlog

from kbroker.protocol.acls import (ALL, ALLOW, DENY, DESCRIBE, DESCRIBE_CONFIGS, IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS,
                           LITERAL, OPERATIONS, PREFIXED, RESOURCE_TYPES, WILDCARD, WILDCARD_PRINCIPAL, AclBinding,
                           AclFilter)

log = structlog.get_logger("broker.security.authorizer")

def _parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class Authorizer:
    """The ACL cache and the decisions made from it (see the module docstring)."""

    def __init__(self, super_users: str = "", allow_if_no_acl: bool = False) -> None:
        self.super_users = _parse_super_users(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        # resource type -> (pattern type, name) -> bindings
        self._acls: dict[int, dict[tuple[int, str], frozenset[AclBinding]]] = defaultdict(dict)
        # resource type -> the lengths of its PREFIXED names (a lookup per length, not a scan per pattern)
        self._prefix_lengths: dict[int, frozenset[int]] = {}

    # ------------------------------------------------------------------ the cache
    def replace(self, resource_type: int, pattern_type: int, name: str, bindings) -> None:
        """The ACLs of one resource pattern are now ``bindings`` (empty: none)."""
        by_pattern = self._acls[resource_type]
        if bindings:
            by_pattern[(pattern_type, name)] = frozenset(bindings)
        else:
            by_pattern.pop((pattern_type, name), None)
        if pattern_type == PREFIXED:
            self._prefix_lengths[resource_type] = frozenset(len(n) for p, n in by_pattern if p == PREFIXED)

    def load(self, bindings) -> None:
        """Replace the whole cache (start-up, or a store reloaded after its ZooKeeper session was lost)."""
        grouped: dict[tuple[int, int, str], set[AclBinding]] = defaultdict(set)
        for acl in bindings:
            grouped[acl.resource].add(acl)
        self._acls.clear()
        self._prefix_lengths.clear()
        for (rtype, ptype, name), found in grouped.items():
            self.replace(rtype, ptype, name, found)

    def of_resource(self, resource_type: int, pattern_type: int, name: str) -> frozenset[AclBinding]:
        return self._acls.get(resource_type, {}).get((pattern_type, name), frozenset())

    def bindings(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        found = [a for by_pattern in self._acls.values() for acls in by_pattern.values() for a in acls]
        return [a for a in found if acl_filter is None or acl_filter.matches(a)]

    # ------------------------------------------------------------------ decisions
    def authorize(self, principal: str | None, host: str, operation: int, resource_type: int, name: str,
                  denials=log) -> bool:
        """``denials``: the logger a refusal is logged to (a request's, bound to its peer, API and principal),
        or None where a refusal is not the answer (a fallback follows, or a listing filters)."""
        if principal in self.super_users:
            return True
        by_pattern = self._acls.get(resource_type)
        applying = []
        if by_pattern:
            for key in ((LITERAL, name), (LITERAL, WILDCARD)):
                found = by_pattern.get(key)
                if found:
                    applying.append(found)
            for length in self._prefix_lengths.get(resource_type, ()):
                if length <= len(name):
                    found = by_pattern.get((PREFIXED, name[:length]))
                    if found:
                        applying.append(found)
        allowed = False
        for acls in applying:
            for acl in acls:
                result = _result(acl, principal, host, operation)
                if result == DENY:
                    if denials is not None:
                        _denied(denials, principal, host, operation, resource_type, name, acl)
                    return False
                allowed = allowed or result == ALLOW
        if allowed or (not applying and self.allow_if_no_acl):
            return True
        if denials is not None:
            _denied(denials, principal, host, operation, resource_type, name, None)
        return False

    def authorize_any(self, principal: str | None, host: str, operation: int, resource_type: int) -> bool:
        """May the principal do ``operation`` on at least one resource of this type (Kafka's
        ``authorizeByResourceType``: an ALLOW not undone by a DENY that covers it)? How InitProducerId
        grants idempotence to anyone who may write to some topic (KIP-679)."""
        if principal in self.super_users:
            return True
        by_pattern = self._acls.get(resource_type, {})
        if not by_pattern:
            return self.allow_if_no_acl
        allows: list[AclBinding] = []
        deny_literal: set[str] = set()
        deny_prefixes: list[str] = []
        for acls in by_pattern.values():
            for acl in acls:
                if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD) \
                        or acl.operation not in (operation, ALL):
                    continue
                if acl.permission == DENY:
                    if acl.pattern_type == LITERAL:
                        deny_literal.add(acl.name)
                    else:
                        deny_prefixes.append(acl.name)
                else:
                    allows.append(acl)
        if WILDCARD in deny_literal:
            return False
        for acl in allows:
            if any(acl.name.startswith(p) for p in deny_prefixes):
                continue
            if acl.pattern_type == LITERAL and acl.name != WILDCARD and acl.name in deny_literal:
                continue
            return True
        return False



def _denied(logger, principal, host, operation, resource_type, name, acl) -> None:
    logger.info("authorization_denied", principal=principal, host=host, operation=OPERATIONS.get(operation),
                resource=f"{RESOURCE_TYPES.get(resource_type)}:{name}",
                rule=acl.describe() if acl is not None else "no matching ALLOW")


def _result(acl: AclBinding, principal: str | None, host: str, operation: int) -> int | None:
    """ALLOW or DENY if ``acl`` applies to this caller and operation, else None (the name already matched)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != ALL and acl.operation != operation:
        if acl.permission != ALLOW:
            return None
        if operation == DESCRIBE:
            if acl.operation not in IMPLIES_DESCRIBE:
                return None
        elif operation == DESCRIBE_CONFIGS:
            if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                return None
        else:
            return None
    return acl.permission
