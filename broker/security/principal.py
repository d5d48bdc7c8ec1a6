"""Who is on a connection: Kafka's principals (``User:<name>``), and the TLS rule that names a certificate's holder.

Without a client certificate (or SASL, later) the principal is ``User:ANONYMOUS``, as in Kafka. With one,
the name is the certificate subject's distinguished name as Java's ``X500Principal.getName()`` writes it
(RFC 2253: most specific attribute first, ``CN=client,OU=eng,O=acme,C=US``), rewritten by
``ssl.principal.mapping.rules``: comma-separated ``RULE:<regex>/<replacement>/[L|U]`` entries tried in order,
the first whose regex matches the whole name wins (``$1``... in the replacement, then lower or upper case),
``DEFAULT`` keeps the name as it is, and a name no rule matches is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"

# getpeercert()'s attribute names -> the keywords RFC 2253 writes (others as Java writes them).
_KEYWORDS = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "localityName": "L",
             "stateOrProvinceName": "ST", "countryName": "C", "streetAddress": "STREET", "domainComponent": "DC",
             "userId": "UID", "emailAddress": "EMAILADDRESS", "serialNumber": "SERIALNUMBER", "title": "T",
             "givenName": "GIVENNAME", "surname": "SURNAME"}
_RULE = re.compile(r"\s*(DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)[^,\n]*?|([^,\n]*?))\s*(?:[,\n]\s*|$)")


class PrincipalError(ValueError):
    pass


def distinguished_name(peer_cert: dict) -> str:
    """RFC 2253 text of ``ssl.SSLObject.getpeercert()``'s subject (which lists the RDNs least specific first)."""
    rdns = []
    for rdn in reversed(peer_cert.get("subject", ())):
        rdns.append("+".join(f"{_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None   # None: DEFAULT
    replacement: str = ""
    case: str = ""


def parse_rules(text: str) -> list[_Rule]:
    rules = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _RULE.match(text, pos)
        if match is None or match.end() == pos:
            raise PrincipalError(f"invalid ssl.principal.mapping.rules at {text[pos:]!r}")
        pos = match.end()
        if match.group(1) == "DEFAULT":
            rules.append(_Rule(None))
        elif match.group(5) is not None and match.group(5).strip():
            raise PrincipalError(f"invalid rule {match.group(5)!r} in ssl.principal.mapping.rules")
        elif match.group(2) is not None:
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(3).replace("\\/", "/"))
            rules.append(_Rule(re.compile(match.group(2).replace("\\/", "/")), replacement, match.group(4)))
    return rules or [_Rule(None)]


def apply_rules(rules: list[_Rule], name: str) -> str:
    for rule in rules:
        if rule.pattern is None:
            return name
        match = rule.pattern.fullmatch(name)
        if match is None:
            continue
        result = match.expand(rule.replacement)
        return result.lower() if rule.case == "L" else result.upper() if rule.case == "U" else result
    raise PrincipalError(f"no ssl.principal.mapping.rules rule applies to {name!r}")


def tls_principal(peer_cert: dict | None, rules: list[_Rule]) -> str:
    """The principal of a TLS connection: its client certificate's mapped name, or ANONYMOUS without one."""
    if not peer_cert:
        return ANONYMOUS
    return "User:" + apply_rules(rules, distinguished_name(peer_cert))
