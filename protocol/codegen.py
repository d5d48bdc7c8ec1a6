"""Decoders and encoders generated as plain Python, per (message, version), from the declarations.

construct interprets a message field by field: a method call, a stream read
and a ``struct`` call per integer. The functions made here do the same work
straight-line: runs of fixed-width fields in one ``unpack_from`` / ``pack``,
lengths and bounds checked inline, strings and byte views sliced from the
frame. They are made from the same ``Field`` trees as the construct structs,
which stay the source of truth: ``tests/unit/protocol/test_codegen.py``
checks, for every (api, version, direction), that both produce the same
bytes and the same messages.

Behaviour, as construct's: a missing field is written as its default (a
None too, unless the field is nullable); unknown tagged fields are skipped;
a frame too short, a null where none is allowed, or a varint too long raise
``StreamError``; ``bytes`` and ``records`` decode to zero-copy memoryviews; a
``FileRegion`` (or a list of regions and bytes) in a ``records`` field is left
for the connection to send, its position returned.
"""

from __future__ import annotations

import struct as _struct
from typing import Any, Callable

from construct import StreamError

from kbroker.protocol.types import Encoded, FileRegion, Rows
from kbroker.protocol.types import encode_uvarint as _uvenc

_FIXED = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
          "float64": "d", "bool": "?", "uuid": "16s"}
_MISSING = object()
_NULL_COMPACT, _NULL_ARRAY = b"\x00", b"\xff\xff\xff\xff"
_Z16 = bytes(16)


def _uv(mv, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``: (value, position after it)."""
    if pos < end:
        b = mv[pos]
        if b < 0x80:
            return b, pos + 1
    shift = result = 0
    while True:
        if pos >= end:
            raise StreamError("truncated varint")
        b = mv[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise StreamError("varint too long")


read_uvarint = _uv   # (protobuf's varints are Kafka's unsigned varints: the OTLP reader uses this one)




def _short(what: str):
    raise StreamError(f"frame too short for {what}")


class _Source:
    """The generated module: source lines, the constants they name, and unique function names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {"_uv": _uv, "_uvenc": _uvenc, "StreamError": StreamError,
                                       "_MISSING": _MISSING, "_Z16": _Z16, "_FileRegion": FileRegion,
                                       "_struct": _struct, "_short": _short, "_EMPTY": {}, "_Rows": Rows,
                                       "_Encoded": Encoded}
        self.count = 0
        self.encoders: dict[tuple[int, bool], str] = {}

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value: Any, prefix: str = "_c") -> str:
        name = self.name(prefix)
        self.consts[name] = value
        return name

    def packer(self, codes: str) -> str:
        return self.const(_struct.Struct(">" + codes), "_S")


# ---------------------------------------------------------------------- decoding
def _decode_length(src: _Source, out: list[str], ind: str, var: str, compact: bool, wide: bool) -> None:
    if compact:
        out.append(f"{ind}{var}, pos = _uv(mv, pos, end)")
        out.append(f"{ind}{var} -= 1")
    else:
        s = src.packer("i" if wide else "h")
        out.append(f"{ind}{var} = {s}.unpack_from(mv, pos)[0]")
        out.append(f"{ind}pos += {4 if wide else 2}")


def _decode_prefix(src: _Source, out: list[str], ind: str, target: str, what: str, nullable: bool, compact: bool,
                   wide: bool) -> str:
    """A length prefix and its null case; leaves an open ``else:`` block (indented ``ind + 4``) for the rest."""
    n = src.name("n")
    _decode_length(src, out, ind, n, compact, wide)
    out.append(f"{ind}if {n} < 0:")
    out.append(f"{ind}    {target} = None" if nullable else f"{ind}    raise StreamError('null in non-nullable {what}')")
    out.append(f"{ind}else:")
    return n


def _decode_value(src: _Source, out: list[str], ind: str, target: str, f, version: int, flexible: bool,
                  element: bool = False) -> None:
    """Lines that decode field ``f`` (or, with ``element``, one element of its array) into ``target``."""
    nullable = (not element) and f.nullable is not None and version in f.nullable
    type_ = f.element if element else f.type
    if not element and f.is_array:
        n = _decode_prefix(src, out, ind, target, f"array {f.name}", nullable, flexible, True)
        out.append(f"{ind}    if {n} > end - pos:")
        out.append(f"{ind}        raise StreamError('array of %d longer than the frame {f.name}' % {n})")
        if not f.is_struct and f.element in _FIXED and f.element != "uuid":
            code = _FIXED[f.element]
            size = _struct.calcsize(">" + code)
            out.append(f"{ind}    {target} = list(_struct.unpack_from('>%d{code}' % {n}, mv, pos))")
            out.append(f"{ind}    pos += {size} * {n}")
            return
        lst = src.name("l")
        item = src.name("v")
        out.append(f"{ind}    {lst} = []")
        out.append(f"{ind}    for _ in range({n}):")
        _decode_value(src, out, ind + "        ", item, f, version, flexible, element=True)
        out.append(f"{ind}        {lst}.append({item})")
        out.append(f"{ind}    {target} = {lst}")
        return
    if f.is_struct:
        fn = _struct_decoder(src, f.fields, version, flexible)
        if nullable:   # an int8 marker: negative for null
            out.append(f"{ind}if pos >= end:")
            out.append(f"{ind}    _short('{f.name}')")
            out.append(f"{ind}pos += 1")
            out.append(f"{ind}if mv[pos - 1] >= 0x80:")
            out.append(f"{ind}    {target} = None")
            out.append(f"{ind}else:")
            out.append(f"{ind}    {target}, pos = {fn}(mv, pos, end)")
            return
        out.append(f"{ind}{target}, pos = {fn}(mv, pos, end)")
        return
    if type_ in _FIXED:
        s = src.packer(_FIXED[type_])
        out.append(f"{ind}{target} = {s}.unpack_from(mv, pos)[0]")
        out.append(f"{ind}pos += {s}.size")
        return
    if type_ in ("string", "bytes", "records"):
        n = _decode_prefix(src, out, ind, target, f.name, nullable, flexible, type_ != "string")
        out.append(f"{ind}    if pos + {n} > end:")
        out.append(f"{ind}        _short('{f.name}')")
        if type_ == "string":
            out.append(f"{ind}    {target} = str(mv[pos:pos + {n}], 'utf-8')")
        else:
            out.append(f"{ind}    {target} = mv[pos:pos + {n}]")
        out.append(f"{ind}    pos += {n}")
        return
    raise ValueError(f"unknown type {type_}")


def _struct_decoder(src: _Source, fields, version: int, flexible: bool) -> str:
    from kbroker.protocol.schema import _absent_value, message_class

    fn = src.name("_d")
    out = [f"def {fn}(mv, pos, end):"]
    absent = {}
    regular, tagged = [], {}
    for f in fields:
        if version not in f.versions:
            absent[f.name] = _absent_value(f)
        elif f.tag is not None:
            absent[f.name] = _absent_value(f)
            if flexible:
                tagged[f.tag] = f
        else:
            regular.append(f)
    cls = src.const(message_class(tuple(f.name for f in fields)), "_M")
    out.append(f"    m = {cls}({src.const(absent, '_A')})" if absent else f"    m = {cls}()")
    i = 0
    while i < len(regular):
        f = regular[i]
        if not f.is_array and not f.is_struct and f.type in _FIXED:
            run = [f]
            while i + len(run) < len(regular):
                g = regular[i + len(run)]
                if g.is_array or g.is_struct or g.type not in _FIXED:
                    break
                run.append(g)
            s = src.packer("".join(_FIXED[g.type] for g in run))
            targets = ", ".join(f"m[{g.name!r}]" for g in run)
            out.append(f"    {targets}, = {s}.unpack_from(mv, pos)")
            out.append(f"    pos += {s}.size")
            i += len(run)
            continue
        _decode_value(src, out, "    ", f"m[{f.name!r}]", f, version, flexible)
        i += 1
    if flexible:
        out.append("    nt, pos = _uv(mv, pos, end)")
        out.append("    for _ in range(nt):")
        out.append("        tag, pos = _uv(mv, pos, end)")
        out.append("        size, pos = _uv(mv, pos, end)")
        first = True
        for tag, f in sorted(tagged.items()):
            out.append(f"        {'if' if first else 'elif'} tag == {tag}:")
            _decode_value(src, out, "            ", f"m[{f.name!r}]", f, version, flexible)
            first = False
        if tagged:
            out.append("        else:")
            out.append("            pos = min(pos + size, end)")
        else:
            out.append("        pos = min(pos + size, end)")
    out.append("    return m, pos")
    src.lines.extend(out)
    src.lines.append("")
    return fn


# ---------------------------------------------------------------------- encoding
def _encode_length(src: _Source, out: list[str], ind: str, expr: str, compact: bool, wide: bool, buf: str) -> None:
    if compact:   # (a length under 127 is one byte: no call for the varint, the common case by far)
        n = src.name("n")
        out.append(f"{ind}{n} = {expr} + 1")
        out.append(f"{ind}if {n} < 0x80:")
        out.append(f"{ind}    {buf}.append({n})")
        out.append(f"{ind}else:")
        out.append(f"{ind}    {buf} += _uvenc({n})")
    else:
        s = src.packer("i" if wide else "h")
        out.append(f"{ind}{buf} += {s}.pack({expr})")


def _encode_value(src: _Source, out: list[str], ind: str, v: str, f, version: int, flexible: bool, buf: str,
                  element: bool = False) -> None:
    """Lines that append the encoding of ``v`` (field ``f``, or one element of its array) to ``buf``."""
    nullable = (not element) and f.nullable is not None and version in f.nullable
    type_ = f.element if element else f.type
    if not element and f.is_array:
        out.append(f"{ind}if {v} is None:")
        if nullable:
            out.append(f"{ind}    {buf} += {src.const(_NULL_COMPACT if flexible else _NULL_ARRAY)}")
        else:
            out.append(f"{ind}    raise StreamError('null in non-nullable array {f.name}')")
        out.append(f"{ind}else:")
        _encode_length(src, out, ind + "    ", f"len({v})", flexible, True, buf)
        if not f.is_struct and f.element in _FIXED and f.element != "uuid":
            out.append(f"{ind}    if {v}:")
            out.append(f"{ind}        {buf} += _struct.pack('>%d{_FIXED[f.element]}' % len({v}), *{v})")
            return
        item = src.name("x")
        if f.is_struct:   # (given as Rows: each element a tuple of the fields, see protocol.types.Rows)
            positional = _struct_encoder(src, f.fields, version, flexible, positional=True)
            out.append(f"{ind}    if type({v}) is _Rows:")
            out.append(f"{ind}        for {item} in {v}:")
            out.append(f"{ind}            {positional}({item}, {buf}, regions)")
            out.append(f"{ind}    else:")
            ind += "    "
        out.append(f"{ind}    for {item} in {v}:")
        if f.is_struct:   # (or already encoded: see protocol.types.Encoded)
            out.append(f"{ind}        if type({item}) is _Encoded:")
            out.append(f"{ind}            {buf} += {item}")
            out.append(f"{ind}            continue")
        _encode_value(src, out, ind + "        ", item, f, version, flexible, buf, element=True)
        return
    if f.is_struct:
        fn = _struct_encoder(src, f.fields, version, flexible)
        if nullable:   # an int8 marker: -1 for null, 1 before the fields
            out.append(f"{ind}if {v} is None:")
            out.append(f"{ind}    {buf} += b'\\xff'")
            out.append(f"{ind}else:")
            out.append(f"{ind}    {buf} += b'\\x01'")
            out.append(f"{ind}    {fn}({v}, {buf}, regions)")
            return
        out.append(f"{ind}{fn}({v} if {v} is not None else _EMPTY, {buf}, regions)")
        return
    if type_ == "uuid":
        u = src.name("u")
        out.append(f"{ind}{u} = bytes({v}) if {v} else _Z16")
        out.append(f"{ind}if len({u}) != 16:")
        out.append(f"{ind}    raise StreamError('uuid must be 16 bytes')")
        out.append(f"{ind}{buf} += {u}")
        return
    if type_ in _FIXED:
        out.append(f"{ind}{buf} += {src.packer(_FIXED[type_])}.pack({v})")
        return
    if type_ in ("string", "bytes", "records"):
        wide = type_ != "string"
        null = b"\x00" if flexible else (b"\xff\xff\xff\xff" if wide else b"\xff\xff")
        out.append(f"{ind}if {v} is None:")
        if nullable:
            out.append(f"{ind}    {buf} += {src.const(null)}")
        else:
            out.append(f"{ind}    raise StreamError('null in non-nullable {f.name}')")
        if type_ == "records":
            out.append(f"{ind}elif isinstance({v}, _FileRegion):")
            _encode_length(src, out, ind + "    ", f"{v}.length", flexible, True, buf)
            out.append(f"{ind}    regions.append((len({buf}), {v}))")
            out.append(f"{ind}elif isinstance({v}, list):")
            _encode_length(src, out, ind + "    ", f"sum(len(p) for p in {v})", flexible, True, buf)
            out.append(f"{ind}    for p in {v}:")
            out.append(f"{ind}        if isinstance(p, _FileRegion):")
            out.append(f"{ind}            regions.append((len({buf}), p))")
            out.append(f"{ind}        else:")
            out.append(f"{ind}            {buf} += p")
        out.append(f"{ind}else:")
        d = src.name("s")
        out.append(f"{ind}    {d} = {v}.encode('utf-8')" if type_ == "string" else f"{ind}    {d} = {v}")
        _encode_length(src, out, ind + "    ", f"len({d})", flexible, wide, buf)
        out.append(f"{ind}    {buf} += {d}")
        return
    raise ValueError(f"unknown type {type_}")


def _struct_encoder(src: _Source, fields, version: int, flexible: bool, positional: bool = False) -> str:
    """A function writing one struct: from a dict, or with ``positional`` from a tuple of all the declared
    fields in order (``protocol.types.Rows``)."""
    key = (id(fields), positional)   # (one function per struct and form, however many places use it)
    if key in src.encoders:
        return src.encoders[key]
    fn = src.encoders[key] = src.name("_e")
    out = [f"def {fn}(obj, buf, regions):"] + ([] if positional else ["    get = obj.get"])
    position = {id(f): i for i, f in enumerate(fields)}
    regular = [f for f in fields if version in f.versions and f.tag is None]
    tagged = sorted((f for f in fields if version in f.versions and f.tag is not None and flexible),
                    key=lambda f: f.tag)

    def fetch(f) -> str:
        """Lines putting the field's value (its default when missing, or None and not nullable) in a local."""
        v = src.name("v")
        nullable = f.nullable is not None and version in f.nullable
        default = src.const(f.default, "_D") if isinstance(f.default, (list, dict)) else repr(f.default)
        if positional:
            out.append(f"    {v} = obj[{position[id(f)]}]")
            if not nullable:
                out.append(f"    if {v} is None:")
                out.append(f"        {v} = {default}")
            return v
        out.append(f"    {v} = get({f.name!r}, _MISSING)")
        test = f"{v} is _MISSING" if nullable else f"{v} is _MISSING or {v} is None"
        out.append(f"    if {test}:")
        out.append(f"        {v} = {default}")
        return v

    i = 0
    while i < len(regular):
        f = regular[i]
        if not f.is_array and not f.is_struct and f.type in _FIXED and f.type != "uuid":
            run = [f]
            while i + len(run) < len(regular):
                g = regular[i + len(run)]
                if g.is_array or g.is_struct or g.type not in _FIXED or g.type == "uuid":
                    break
                run.append(g)
            values = [fetch(g) for g in run]
            s = src.packer("".join(_FIXED[g.type] for g in run))
            out.append(f"    buf += {s}.pack({', '.join(values)})")
            i += len(run)
            continue
        v = fetch(f)
        _encode_value(src, out, "    ", v, f, version, flexible, "buf")
        i += 1
    if flexible:
        if not tagged:
            out.append("    buf += b'\\x00'")
        else:
            out.append("    tagged = []")
            for f in tagged:
                v = src.name("t")
                default = src.const(f.default, "_D")
                got = f"obj[{position[id(f)]}]" if positional else f"get({f.name!r}, _MISSING)"
                out.append(f"    {v} = {got}")
                out.append(f"    if not ({v} is _MISSING or {v} is None or {v} == {default}):")
                out.append("        sub = bytearray()")
                _encode_value(src, out, "        ", v, f, version, flexible, "sub")
                out.append(f"        tagged.append(({f.tag}, sub))")
            out.append("    buf += _uvenc(len(tagged))")
            out.append("    for tag, data in tagged:")
            out.append("        buf += _uvenc(tag)")
            out.append("        buf += _uvenc(len(data))")
            out.append("        buf += data")
    src.lines.extend(out)
    src.lines.append("")
    return fn


# ---------------------------------------------------------------------- entry points
def build(fields, version: int, flexible: bool) -> tuple[Callable, Callable]:
    """(decode(reader) -> Message, encode(obj, out) -> regions) for one message at one version."""
    src = _Source()
    dec = _struct_decoder(src, fields, version, flexible)
    enc = _struct_encoder(src, fields, version, flexible)
    src.lines += [
        "def decode(reader):",
        "    try:",
        f"        m, pos = {dec}(reader._mv, reader._pos, reader._end)",
        "    except _struct.error as exc:",
        "        raise StreamError(str(exc)) from None",
        "    reader._pos = pos",
        "    return m",
        "",
        "def encode(obj, out):",
        "    buf = bytearray()",
        "    regions = []",
        f"    {enc}(obj, buf, regions)",
        "    base = out.tell()",
        "    out.write(buf)",
        "    return [(base + p, r) for p, r in regions] if regions else regions",
    ]
    namespace = _compiled(src, f"<codegen v{version}>")
    return namespace["decode"], namespace["encode"]


def build_element(fields, version: int, flexible: bool) -> Callable[[dict], Encoded]:
    """encode(obj) -> Encoded: one struct of ``fields`` (an array's element) at one version, on its own."""
    src = _Source()
    enc = _struct_encoder(src, fields, version, flexible)
    src.lines += [
        "def encode(obj):",
        "    buf = bytearray()",
        "    regions = []",
        f"    {enc}(obj, buf, regions)",
        "    if regions:",
        "        raise StreamError('a file region in an element encoded on its own')",
        "    return _Encoded(buf)",
    ]
    return _compiled(src, f"<codegen element v{version}>")["encode"]


def _compiled(src: _Source, label: str) -> dict:
    namespace = dict(src.consts)
    exec(compile("\n".join(src.lines), label, "exec"), namespace)  # noqa: S102
    return namespace
