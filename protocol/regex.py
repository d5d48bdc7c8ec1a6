"""Regular expressions in the protocol's fields, read as Kafka reads them: a KIP-848 member's
``subscribed_topic_regex`` and ListTransactions' ``transactional_id_pattern`` (KIP-1152) in RE2's syntax
(Kafka uses RE2/J), which has no lookaround and no back-references, and has POSIX classes and Unicode
properties (``[[:alpha:]]``, ``\\p{Lu}``) that Python's ``re`` lacks. An expression matches a name whole."""

from __future__ import annotations

import functools
import re

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False   # (a client's bad expression is answered INVALID_REGULAR_EXPRESSION, not logged by RE2)


class InvalidRegex(ValueError):
    """Not an expression RE2/J reads; the message says why in RE2's words, ``description`` in RE2/J's (what its
    PatternSyntaxException.getDescription gives, and Kafka answers)."""

    def __init__(self, message: str, description: str) -> None:
        super().__init__(message)
        self.description = description


# RE2's (C++) words for each error -> RE2/J's, which follow Go's regexp/syntax (its quirk included: an
# unopened ')' is its "internal error")
_DESCRIPTIONS = {
    "missing ]": "missing closing ]", "missing )": "missing closing )",
    "unexpected )": "regexp/syntax: internal error", "bad repetition operator": "invalid nested repetition operator",
    "invalid repetition size": "invalid repeat count", "trailing \\": "trailing backslash at end of expression",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid named capture group": "invalid named capture"}
# Where RE2/J refuses what RE2 takes: a capture group's name given twice, and \C (any byte), which RE2/J
# has no use for in a string of chars.
_NAMED_GROUP = re.compile(r"\(\?P?<([^>]*)>")
_ANY_BYTE = re.compile(r"(?<!\\)(?:\\\\)*\\C")


@functools.lru_cache(maxsize=256)
def compiled(expression: str):
    """The expression compiled, or ``InvalidRegex``. (Cached: every member of a group resolves the same one.)"""
    try:
        pattern = re2.compile(expression, _OPTIONS)
    except re2.error as exc:
        message = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        code = message.split(": ", 1)[0]
        raise InvalidRegex(message, _DESCRIPTIONS.get(code, code)) from None
    names = _NAMED_GROUP.findall(expression)
    if len(names) != len(set(names)):
        raise InvalidRegex("duplicate capture group name", "duplicate capture group name")
    if _ANY_BYTE.search(expression):
        raise InvalidRegex("invalid escape sequence: \\C", "invalid escape sequence")
    return pattern


def matching(expression: str, names) -> frozenset[str]:
    """The names the expression matches whole (none, for an expression RE2 does not read)."""
    try:
        pattern = compiled(expression)
    except InvalidRegex:
        return frozenset()
    return frozenset(n for n in names if pattern.fullmatch(n))
