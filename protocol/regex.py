"""Regular expressions in the protocol's fields, read as Kafka reads them: a KIP-848 member's
``subscribed_topic_regex`` and ListTransactions' ``transactional_id_pattern`` (KIP-1152) in RE2's syntax
(Kafka uses RE2/J), which has no lookaround and no back-references, and has POSIX classes and Unicode
properties (``[[:alpha:]]``, ``\\p{Lu}``) that Python's ``re`` lacks. An expression matches a name whole."""

from __future__ import annotations

import functools

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False   # (a client's bad expression is answered INVALID_REGULAR_EXPRESSION, not logged by RE2)


class InvalidRegex(ValueError):
    """Not an expression RE2 reads; the message says why."""


@functools.lru_cache(maxsize=256)
def compiled(expression: str):
    """The expression compiled, or ``InvalidRegex``. (Cached: every member of a group resolves the same one.)"""
    try:
        return re2.compile(expression, _OPTIONS)
    except re2.error as exc:
        message = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegex(message) from None


def matching(expression: str, names) -> frozenset[str]:
    """The names the expression matches whole (none, for an expression RE2 does not read)."""
    try:
        pattern = compiled(expression)
    except InvalidRegex:
        return frozenset()
    return frozenset(n for n in names if pattern.fullmatch(n))
