"""The JAAS configuration lines Kafka's SASL settings are written in (``sasl.jaas.config``).

``org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s" user_alice="a";``
names a login module, a control flag and options. kbroker reads the options only: ``username`` and
``password`` (what a client, or a broker towards the others, logs in with), and on a broker's PLAIN entry
``user_<name>="<password>"``, the users a listener accepts.
"""

from __future__ import annotations

import re

_MODULE = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b", re.IGNORECASE)
_OPTION = re.compile(r"\s*([\w.\-]+)\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|([^\s;\"]+))")
_END = re.compile(r"\s*;\s*$")


class JaasError(ValueError):
    pass


def parse_jaas(text: str) -> dict[str, str]:
    """The options of the (first) login module in ``text``."""
    match = _MODULE.match(text)
    if match is None:
        raise JaasError(f"JAAS config must start with a login module and its flag: {text!r}")
    pos = match.end()
    options = {}
    while not _END.match(text, pos):
        option = _OPTION.match(text, pos)
        if option is None:
            raise JaasError(f"JAAS config: cannot read an option at {text[pos:]!r}")
        value = option.group(2) if option.group(2) is not None else option.group(3)
        options[option.group(1)] = re.sub(r"\\(.)", r"\1", value)
        pos = option.end()
    return options


def plain_users(options: dict[str, str]) -> dict[str, str]:
    """PLAIN's ``user_<name>="<password>"`` options as name -> password."""
    return {key[len("user_"):]: value for key, value in options.items() if key.startswith("user_")}
