"""The protocol's regexes (KIP-848 topic regexes, ListTransactions patterns) are read in RE2's syntax, as
Kafka reads them (RE2/J)."""

import pytest

from kbroker.protocol.regex import InvalidRegex, compiled, matching

NAMES = ["orders-eu", "orders-us", "Audit", "__consumer_offsets", "orders"]


@pytest.mark.parametrize("expression, expected", [
    ("orders-.*", {"orders-eu", "orders-us"}),
    ("orders", {"orders"}),                                  # matched whole, not searched
    ("[[:alpha:]]+", {"Audit", "orders"}),                   # POSIX classes (Python's re reads no such thing)
    ("\\p{Lu}.*", {"Audit"}),                                # Unicode properties
    ("__.*", {"__consumer_offsets"}),                        # internal topics too, as Kafka resolves them
])
def test_an_expression_matches_topic_names_whole_in_re2s_syntax(expression, expected):
    assert matching(expression, NAMES) == expected


@pytest.mark.parametrize("expression", ["(?=orders).*", "(a)\\1", "[", "(?P<x>a)(?P=x)"])
def test_what_re2_does_not_read_is_invalid_and_matches_nothing(expression):
    with pytest.raises(InvalidRegex):
        compiled(expression)
    assert matching(expression, NAMES) == frozenset()
