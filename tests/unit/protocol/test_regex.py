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


# expression -> RE2/J's description of its fault (PatternSyntaxException.getDescription, as RE2/J 1.8, the
# version Kafka 4.2 ships, gives it: each checked there with Java 17)
RE2J_DESCRIPTIONS = {
    "([": "missing closing ]", "((((a": "missing closing )", "a)": "regexp/syntax: internal error",
    "a**": "invalid nested repetition operator", "x{2}{3}": "invalid nested repetition operator",
    "a{2,1}": "invalid repeat count", "a{1001}": "invalid repeat count",
    "\\": "trailing backslash at end of expression", "\\q": "invalid escape sequence",
    "\\C": "invalid escape sequence", "[z-a]": "invalid character class range",
    "[[:foo:]]": "invalid character class range", "\\p{Foo}": "invalid character class range",
    "(?P<n>a)(?P<n>b)": "duplicate capture group name", "(?=a)": "invalid or unsupported Perl syntax",
    "*a": "missing argument to repetition operator", "(?P<>a)": "invalid named capture",
}


@pytest.mark.parametrize("expression", list(RE2J_DESCRIPTIONS))
def test_a_fault_is_described_in_re2js_words(expression):
    with pytest.raises(InvalidRegex) as caught:
        compiled(expression)
    assert caught.value.description == RE2J_DESCRIPTIONS[expression]
