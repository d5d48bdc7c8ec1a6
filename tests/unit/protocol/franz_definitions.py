"""Reads franz-go's message definitions (``../shared/kafka-protocol/franz-go-definitions/``, its grammar in
GRAMMAR.md there) into wire layouts: for each API key, the request and response fields with the versions
each exists in, its nullability, tag and element kind. Kafka 4.2's versions are there where the official
JSON schemas beside them stop (October 2024).

Names differ between franz-go and Kafka's JSON (``Topic`` / ``Name``), so a layout is compared without them:
what goes on the wire is kinds, order, nullability and tags.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

FOLDER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "kafka-protocol",
                      "franz-go-definitions")
ALWAYS = (0, 1 << 15)
_FIELD = re.compile(r"^(?P<indent> *)(?P<name>\w+)(?:: (?P<type>\S+))?(?P<rest>.*)$")
_HEAD = re.compile(r"^(?P<name>\w+) =>(?P<mods>.*)$")
_ENUM = re.compile(r"^(?P<name>\w+) (?P<kind>u?int\d+)( camelcase)? \($")


@dataclass
class WireField:
    kind: str                              # a primitive, "struct" or "array:<element>"
    versions: tuple[int, int]
    nullable: tuple[int, int] | None       # the versions it is nullable in
    tag: int | None
    children: list["WireField"] = field(default_factory=list)


@dataclass
class Message:
    key: int
    max_version: int
    flexible: int | None                   # the first flexible version
    request: list[WireField]
    response: list[WireField]


def _versions(comment: str) -> tuple[int, int]:
    m = re.match(r"v(\d+)\+", comment)
    if m:
        return int(m.group(1)), ALWAYS[1]
    m = re.match(r"v(\d+)-v(\d+)", comment)
    if m:
        return int(m.group(1)), int(m.group(2))
    return ALWAYS


def _type(text: str, enums: dict[str, str]) -> tuple[str, tuple[int, int] | None, bool, str | None]:
    """(kind, nullable versions, is an inline struct, named element) of a field's type text."""
    text = re.sub(r"\(.*\)$", "", text)                          # a default value
    nullable = None
    m = re.match(r"nullable(?:-v(\d+)\+)?(.*)$", text)
    if m and m.group(2)[:1] in ("[", "=", "-"):
        nullable = (int(m.group(1)), ALWAYS[1]) if m.group(1) else ALWAYS
        text = m.group(2).lstrip("-")
    m = re.match(r"(string|bytes)-v(\d+)\+$", text)              # nullable-string-v12+
    if m:
        return m.group(1), (int(m.group(2)), ALWAYS[1]), False, None
    if text.startswith("varint["):
        text = text[len("varint"):]
    if text.startswith("[=>"):
        return "array:struct", nullable, True, None
    if text == "=>":
        return "struct", nullable, True, None
    if text.startswith("["):
        element = text[1:text.index("]")]
        element = enums.get(element[len("enum-"):], element) if element.startswith("enum-") else element
        if element[:1].isupper():
            return "array:struct", nullable, False, element
        return "array:" + element, nullable, False, None
    if text.startswith("enum-"):
        return enums[text[len("enum-"):]], nullable, False, None
    if text[:1].isupper():
        return "struct", nullable, False, text
    return text, nullable, False, None


def _parse_fields(lines: list[str], start: int, indent: int, enums, named) -> tuple[list[WireField], int]:
    out: list[WireField] = []
    i = start
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.strip().startswith("//"):
            i += 1
            continue
        m = _FIELD.match(line)
        depth = len(m.group("indent")) if m else 0
        if depth < indent or not m:
            break
        code, _, comment = line.partition("//")
        comment = comment.strip()
        versions = _versions(comment)
        tag = re.search(r"tag (\d+)", comment)
        type_text = m.group("type")
        if type_text is None:                                     # ThrottleMillis, TimeoutMillis
            out.append(WireField("int32", versions, None, int(tag.group(1)) if tag else None))
            i += 1
            continue
        kind, nullable, inline, named_element = _type(type_text.strip(), enums)
        i += 1
        children: list[WireField] = []
        if inline:
            children, i = _parse_fields(lines, i, depth + 2, enums, named)
        elif named_element is not None:
            children = named[named_element]
        if kind in ("string", "bytes") and type_text.startswith("nullable-") and nullable is None:
            nullable = ALWAYS
        out.append(WireField(kind, versions, nullable, int(tag.group(1)) if tag else None, children))
    return out, i


def load() -> dict[int, Message]:
    """Every request/response pair by API key."""
    names = sorted(os.listdir(FOLDER))
    enums: dict[str, str] = {}
    with open(os.path.join(FOLDER, "enums"), encoding="utf-8") as f:
        for line in f:
            m = _ENUM.match(line.strip())
            if m:
                enums[m.group("name")] = m.group("kind")
    texts = [open(os.path.join(FOLDER, n), encoding="utf-8").read().splitlines()
             for n in ["misc"] + [n for n in names if n[:2].isdigit()]]
    named: dict[str, list[WireField]] = {}
    messages: dict[int, Message] = {}
    pending: dict | None = None
    for lines in texts:
        i = 0
        while i < len(lines):
            head = _HEAD.match(lines[i])
            if not head:
                i += 1
                continue
            fields, i = _parse_fields(lines, i + 1, 2, enums, named)
            name, mods = head.group("name"), head.group("mods")
            key = re.search(r"key (\d+)", mods)
            if key:
                flexible = re.search(r"flexible v(\d+)\+", mods)
                pending = {"key": int(key.group(1)), "max": int(re.search(r"max version (\d+)", mods).group(1)),
                           "flexible": int(flexible.group(1)) if flexible else None, "request": fields}
            elif name.endswith("Response") and pending is not None:
                messages[pending["key"]] = Message(pending["key"], pending["max"], pending["flexible"],
                                                   pending["request"], fields)
                pending = None
            else:
                named[name] = fields
    return messages


def layout(fields: list[WireField], version: int, flexible: bool) -> list[tuple]:
    """(kind, nullable, tag, children) of the fields on the wire at ``version``."""
    out = []
    for f in fields:
        if not f.versions[0] <= version <= f.versions[1]:
            continue
        if f.tag is not None and not flexible:
            continue
        nullable = f.nullable is not None and f.nullable[0] <= version <= f.nullable[1]
        out.append((f.kind, nullable, f.tag, layout(f.children, version, flexible) if f.children else None))
    return out
