"""The compact schema notation and the construct structs built from it.

One declaration per API covers all its supported versions. A message body is
an indented list of fields, one a line::

    name  type  [versions]  [@tag]  [=default]

* ``type``: ``int8 int16 uint16 int32 uint32 int64 float64 bool uuid string
  bytes records``; ``[]int32`` for an array of primitives; ``[Name]`` for an
  array of structs and ``Name`` for a struct, whose fields follow indented.
  A ``?`` suffix makes it nullable in all its versions, ``?3+`` in some.
* ``versions``: ``3+``, ``0-4`` or ``5``; absent means every version.
* ``@N``: a tagged field with tag N (only in flexible versions).
* ``=default``: the value when absent (``-1``, ``null``, ``0x7fffffff``...).

``struct_for(api_key, version, is_request)`` builds and caches one construct
per (api, version, direction). Decoded messages are ``Message`` dicts with
attribute access; fields absent from a version hold their defaults.
"""

from __future__ import annotations

import functools
import io
import operator
import struct as _struct
from dataclasses import dataclass, field
from typing import Any

from construct import Construct, Container, StreamError

from kbroker.protocol import types as t

MAX_VERSION = 0x7FFF
_MISSING = object()
_PRIMITIVES = {
    "int8": t.INT8, "int16": t.INT16, "uint16": t.UINT16, "int32": t.INT32,
    "uint32": t.UINT32, "int64": t.INT64, "float64": t.FLOAT64, "bool": t.BOOL, "uuid": t.UUID,
}
_ZERO = {"int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0,
         "float64": 0.0, "bool": False, "uuid": bytes(16), "string": "", "bytes": b"", "records": None}


class MissingField(KeyError, AttributeError):
    """A name a Message does not hold, read by key or as an attribute: ``except KeyError`` and ``getattr``'s
    default both work, whichever way it was read."""


class Message(dict):
    """A decoded message or struct: a dict whose keys are also attributes."""

    __slots__ = ()

    def __missing__(self, name: str) -> Any:
        # (also reached through a message_class property's itemgetter, which Python would not turn into
        # AttributeError by itself: a field deleted from a decoded message still reads as missing)
        raise MissingField(name)

    def __getattr__(self, name: str) -> Any:
        return self[name]

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __reduce__(self):
        # (a message_class subclass is made at run time: it pickles and copies as a plain Message)
        return Message, (dict(self),)


@functools.lru_cache(maxsize=None)
def message_class(names: tuple[str, ...]) -> type[Message]:
    """A ``Message`` whose listed keys read as attributes through a property (a C ``itemgetter``), not through
    ``__getattr__``, which Python reaches only after a failed lookup has raised AttributeError: 0.33 against
    0.05 µs a read, and a request's handler reads a few dozen. Names that are also dict methods (``items``,
    ``keys``...) stay methods, as on ``Message``. Instances equal, copy and pickle as plain Messages."""
    props = {name: property(operator.itemgetter(name)) for name in names if not hasattr(dict, name)}
    return type("Message", (Message,), {"__slots__": (), **props})


@dataclass(frozen=True)
class Versions:
    low: int
    high: int

    @classmethod
    def parse(cls, spec: str | None) -> "Versions":
        if not spec:
            return cls(0, MAX_VERSION)
        if spec.endswith("+"):
            return cls(int(spec[:-1]), MAX_VERSION)
        if "-" in spec:
            low, high = spec.split("-")
            return cls(int(low), int(high))
        return cls(int(spec), int(spec))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high


@dataclass
class Field:
    name: str
    type: str                  # primitive name, "[]prim", "[Name]" or "Name"
    versions: Versions
    nullable: Versions | None
    tag: int | None
    default: Any
    fields: list["Field"] = field(default_factory=list)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[")

    @property
    def element(self) -> str:
        return self.type[2:] if self.type.startswith("[]") else self.type.strip("[]")

    @property
    def is_struct(self) -> bool:
        return bool(self.fields)


@dataclass
class Api:
    key: int
    name: str
    versions: Versions
    flexible: Versions | None
    request: list[Field]
    response: list[Field]

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version in self.flexible


REGISTRY: dict[int, Api] = {}


@dataclass
class DataSchema:
    """A versioned record schema with no api key (the internal topics' keys and values)."""

    name: str
    versions: Versions
    flexible: Versions | None
    fields: list[Field]

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version in self.flexible


DATA: dict[str, DataSchema] = {}


def data(name: str, versions: str, *, flexible: str | None, fields: str) -> DataSchema:
    """Declare a record schema; registered by its name."""
    declared = DataSchema(name, Versions.parse(versions), Versions.parse(flexible) if flexible else None,
                          parse_fields(fields))
    DATA[name] = declared
    return declared


@functools.lru_cache(maxsize=None)
def data_struct(name: str, version: int) -> "KStruct":
    declared = DATA[name]
    if version not in declared.versions:
        raise ValueError(f"{name} v{version} is not supported")
    return _with_codecs(build_struct(declared.fields, version, declared.is_flexible(version)), declared.fields,
                        version, declared.is_flexible(version))


def api(key: int, name: str, versions: str, *, flexible: str | None, request: str, response: str) -> Api:
    """Declare an API; the declaration is registered by its key."""
    declared = Api(key, name, Versions.parse(versions),
                   Versions.parse(flexible) if flexible else None,
                   parse_fields(request), parse_fields(response))
    REGISTRY[key] = declared
    return declared


def _parse_default(raw: str, type_: str) -> Any:
    if raw == "null":
        return None
    if type_ == "bool":
        return raw == "true"
    if type_ in ("string",):
        return raw
    if type_ == "float64":
        return float(raw)
    return int(raw, 0)


def parse_fields(text: str) -> list[Field]:
    """Parse an indented field list into a tree of Fields."""
    root: list[Field] = []
    stack: list[tuple[int, list[Field]]] = [(-1, root)]
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        tokens = line.split()
        if len(tokens) < 2:
            raise ValueError(f"line {lineno}: need a name and a type: {line!r}")
        name, type_ = tokens[0], tokens[1]
        nullable = None
        if "?" in type_:
            type_, _, nspec = type_.partition("?")
            nullable = nspec
        versions, tag, default = Versions.parse(None), None, _MISSING
        for tok in tokens[2:]:
            if tok.startswith("@"):
                tag = int(tok[1:])
            elif tok.startswith("="):
                default = tok[1:]
            else:
                versions = Versions.parse(tok)
        nullable_versions = None
        if nullable is not None:
            nullable_versions = Versions.parse(nullable) if nullable else versions
        while stack[-1][0] >= indent:
            stack.pop()
        f = Field(name, type_, versions, nullable_versions, tag, None)
        if default is not _MISSING:
            f.default = _parse_default(default, f.element)
        elif f.is_array:
            f.default = []
        else:
            f.default = _ZERO.get(type_)
        stack[-1][1].append(f)
        stack.append((indent, f.fields))
    return root


class KStruct(Construct):
    """A Kafka struct for one version: its fields in order, then (flexible) tagged fields.

    Building fills a missing key with the field's default; a nullable field set
    to None is written as null. Unknown tagged fields are skipped when parsing.
    """

    def __init__(self, fields: list[tuple[str, Construct, Any, bool]],
                 tagged: dict[int, tuple[str, Construct, Any]], flexible: bool,
                 absent: dict[str, Any]) -> None:
        super().__init__()
        self.fields = fields
        self.tagged = tagged
        self.flexible = flexible
        self.absent = absent
        self.message = message_class(tuple(dict.fromkeys([*(f[0] for f in fields), *(f[0] for f in tagged.values()),
                                                           *absent])))
        self.fast: tuple | None = None   # (decode, encode) generated by protocol.codegen, for top-level messages

    def _parse(self, stream, context, path):
        result = self.message(self.absent)
        for name, sub, _default, _nullable in self.fields:
            result[name] = sub._parse(stream, context, path)
        if self.flexible:
            for _ in range(t.read_uvarint(stream)):
                tag = t.read_uvarint(stream)
                size = t.read_uvarint(stream)
                known = self.tagged.get(tag)
                if known is None:
                    stream.read(size)
                else:
                    result[known[0]] = known[1]._parse(stream, context, path)
        return result

    def _build(self, obj, stream, context, path):
        get = obj.get
        for name, sub, default, nullable in self.fields:
            value = get(name, _MISSING)
            if value is _MISSING or (value is None and not nullable):
                value = default
            sub._build(value, stream, context, path)
        if self.flexible:
            present = []
            for tag, (name, sub, default) in self.tagged.items():
                value = get(name, _MISSING)
                if value is _MISSING or value is None or value == default:
                    continue
                buf = io.BytesIO()
                sub._build(value, buf, context, path)
                present.append((tag, buf.getvalue()))
            stream.write(t.encode_uvarint(len(present)))
            for tag, data in present:
                stream.write(t.encode_uvarint(tag))
                stream.write(t.encode_uvarint(len(data)))
                stream.write(data)
        return obj


def _field_construct(f: Field, version: int, flexible: bool) -> Construct:
    nullable = f.nullable is not None and version in f.nullable
    if f.is_array:
        element = f.element
        if f.is_struct:
            sub = build_struct(f.fields, version, flexible)
        else:
            sub = _scalar(element, flexible, False)
        return t.KArray(sub, flexible, nullable)
    if f.is_struct:
        struct = build_struct(f.fields, version, flexible)
        return t.KNullableStruct(struct) if nullable else struct
    return _scalar(f.type, flexible, nullable)


def _scalar(type_: str, flexible: bool, nullable: bool) -> Construct:
    if type_ in _PRIMITIVES:
        return _PRIMITIVES[type_]
    if type_ == "string":
        return t.KString(flexible, nullable)
    if type_ == "bytes":
        return t.KBytes(flexible, nullable)
    if type_ == "records":
        return t.KRecords(flexible, nullable)
    raise ValueError(f"unknown type {type_}")


def _absent_value(f: Field) -> Any:
    if f.is_struct and not f.is_array:
        return None
    return list(f.default) if isinstance(f.default, list) else f.default


def build_struct(fields: list[Field], version: int, flexible: bool) -> KStruct:
    """The construct of a field list at one version (tagged fields only when flexible)."""
    regular, tagged, absent = [], {}, {}
    for f in fields:
        if version not in f.versions:
            absent[f.name] = _absent_value(f)
            continue
        sub = _field_construct(f, version, flexible)
        nullable = f.nullable is not None and version in f.nullable
        if f.tag is not None:
            if flexible:
                tagged[f.tag] = (f.name, sub, f.default)
            absent[f.name] = _absent_value(f)
        else:
            regular.append((f.name, sub, f.default, nullable))
    return KStruct(regular, dict(sorted(tagged.items())), flexible, absent)


@functools.lru_cache(maxsize=None)
def struct_for(api_key: int, version: int, is_request: bool) -> KStruct:
    declared = REGISTRY[api_key]
    if version not in declared.versions:
        raise ValueError(f"{declared.name} v{version} is not supported")
    fields = declared.request if is_request else declared.response
    return _with_codecs(build_struct(fields, version, declared.is_flexible(version)), fields, version,
                        declared.is_flexible(version))


@functools.lru_cache(maxsize=None)
def element_encoder(api_key: int, version: int, field_name: str):
    """encode(obj) -> types.Encoded: one element of the response's top-level array of structs ``field_name``
    at ``version``, on its own, to be given to the response's encoder in place of the element's dict."""
    declared = REGISTRY[api_key]
    if version not in declared.versions:
        raise ValueError(f"{declared.name} v{version} is not supported")
    from kbroker.protocol import codegen

    (f,) = [f for f in declared.response if f.name == field_name and f.is_struct]
    return codegen.build_element(f.fields, version, declared.is_flexible(version))


def _with_codecs(struct: "KStruct", fields: list[Field], version: int, flexible: bool) -> "KStruct":
    """Attach the generated decoder and encoder (protocol.codegen), which ``decode``/``encode`` then use."""
    from kbroker.protocol import codegen

    struct.fast = codegen.build(fields, version, flexible)
    return struct


def _context(regions: list | None = None) -> Container:
    ctx = Container(_parsing=regions is None, _building=regions is not None, _sizing=False)
    ctx._params = Container(regions=regions if regions is not None else [])
    return ctx


def decode(struct: KStruct, reader: t.BufferReader) -> Message:
    """Parse one message body; raises StreamError on malformed or trailing-short input."""
    if struct.fast is not None:
        return struct.fast[0](reader)
    return struct._parse(reader, _context(), "")


def encode(struct: KStruct, obj: dict, out: io.BytesIO | None = None) -> tuple[io.BytesIO, list]:
    """Build a message body into ``out``; returns it and the FileRegions left to send."""
    out = out if out is not None else io.BytesIO()
    if struct.fast is not None:
        return out, struct.fast[1](obj, out)
    regions: list = []
    struct._build(obj, out, _context(regions), "")
    return out, regions


def decode_record(name: str, data: bytes, earlier: str | None = None) -> tuple[int, Message]:
    """A coordinator record's key or value: an int16 version, then ``name`` at that version.

    With ``earlier`` (a layout kbroker once wrote for the same record), bytes that do not read as ``name`` whole
    (StreamError, or bytes left over) are read as ``earlier``; without it a StreamError is raised."""
    (version,) = _RECORD_VERSION.unpack_from(data)
    try:
        reader = t.BufferReader(data, 2)
        message = decode(data_struct(name, version), reader)
        if earlier is not None and reader.tell() != len(data):
            raise StreamError(f"{len(data) - reader.tell()} bytes after {name} v{version}")
        return version, message
    except StreamError:
        if earlier is None:
            raise
        return decode_record(earlier, data)


def encode_record(name: str, version: int, obj: dict) -> bytes:
    """A coordinator record's key or value: an int16 version, then ``obj`` as ``name`` at that version."""
    out, _ = encode(data_struct(name, version), obj)
    return _RECORD_VERSION.pack(version) + out.getvalue()


_RECORD_VERSION = _struct.Struct(">h")


def decode_construct(struct: KStruct, reader: t.BufferReader) -> Message:
    """``decode`` by construct's interpretation alone (the reference the generated code is tested against)."""
    return struct._parse(reader, _context(), "")


def encode_construct(struct: KStruct, obj: dict, out: io.BytesIO | None = None) -> tuple[io.BytesIO, list]:
    out = out if out is not None else io.BytesIO()
    regions: list = []
    struct._build(obj, out, _context(regions), "")
    return out, regions


__all__ = ["Api", "DATA", "DataSchema", "Field", "KStruct", "Message", "REGISTRY", "Versions", "api", "data",
           "data_struct", "decode", "decode_record",
           "encode", "encode_record", "parse_fields", "struct_for", "StreamError"]
