"""CDR (XCDR1) code generation behind :mod:`ferry.idl` (private module).

Holds the field type markers, the runtime helpers the generated codecs call
and :class:`_Gen`, which writes the source of one encoder or decoder
(``ferry.idl._build`` compiles it). The public API, and the documentation of
the format, is in :mod:`ferry.idl`.
"""

from __future__ import annotations

import struct

import numpy as np

#: Encapsulation header of little-endian plain CDR (what ferry sends).
CDR_LE_HEADER = b"\x00\x01\x00\x00"


class DecodeError(ValueError):
    """Bytes that are not a valid encoding of the message type."""

    def __init__(self, type_name: str, length: int, reason: str):
        self.type_name, self.length, self.reason = type_name, length, reason
        super().__init__(f"cannot decode {type_name} from {length} bytes: {reason}")


class EncodeError(ValueError):
    """A message whose field values cannot be encoded as their declared types."""

    def __init__(self, type_name: str, field: str, reason: str):
        self.type_name, self.field, self.reason = type_name, field, reason
        super().__init__(f"cannot encode {type_name}: field {field!r}: {reason}")


# ---------------------------------------------------------------- field types


class _Prim:
    """A primitive ROS type: its name, struct code, size and numpy dtype."""

    def __init__(self, name, code, dtype, default):
        self.name, self.code, self.dtype, self.default = name, code, dtype, default
        self.size = struct.calcsize(code)
        self.dcode = "B" if code == "?" else code  # bools are checked on decode
        self.kind = "bool" if code == "?" else ("float" if code in "fd" else "int")
        if self.kind == "int":
            bits = 8 * self.size
            signed = code.islower()
            self.lo = -(1 << (bits - 1)) if signed else 0
            self.hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1

    def __repr__(self):
        return self.name


class _String:
    """``string`` or ``string<=N`` (UTF-8), ``wstring`` or ``wstring<=N``
    (UTF-16 code units); call ``string(max=N)`` for a bounded string."""

    def __init__(self, bound=None, wide=False):
        self.bound, self.wide = bound, wide

    def __call__(self, max):  # noqa: A002 - mirrors the IDL wording
        if self.bound is not None:
            raise TypeError(f"{self!r}(max=N) applies to the unbounded `{self!r}` only")
        return _String(_positive(max, "string bound"), self.wide)

    def __repr__(self):
        name = "wstring" if self.wide else "string"
        return name if self.bound is None else f"{name}<={self.bound}"


class _Seq:
    """A sequence ``T[]`` (``bound`` None) or ``T[<=N]``."""

    def __init__(self, elem, bound):
        self.elem, self.bound = elem, bound

    def __repr__(self):
        return f"sequence({self.elem!r}" + ("" if self.bound is None else f", max={self.bound}") + ")"


class _Array:
    """A fixed array ``T[N]`` (no count on the wire)."""

    def __init__(self, elem, n):
        self.elem, self.n = elem, n

    def __repr__(self):
        return f"array({self.elem!r}, {self.n})"


bool_ = _Prim("bool", "?", None, False)
byte = _Prim("byte", "B", "u1", 0)
char = _Prim("char", "B", "u1", 0)
int8 = _Prim("int8", "b", "i1", 0)
uint8 = _Prim("uint8", "B", "u1", 0)
int16 = _Prim("int16", "h", "i2", 0)
uint16 = _Prim("uint16", "H", "u2", 0)
int32 = _Prim("int32", "i", "i4", 0)
uint32 = _Prim("uint32", "I", "u4", 0)
int64 = _Prim("int64", "q", "i8", 0)
uint64 = _Prim("uint64", "Q", "u8", 0)
float32 = _Prim("float32", "f", "f4", 0.0)
float64 = _Prim("float64", "d", "f8", 0.0)
string = _String()
wstring = _String(wide=True)


def _positive(n, what):
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise TypeError(f"{what} must be a positive int, got {n!r}")
    return n


def _numeric(t):
    return isinstance(t, _Prim) and t.kind != "bool"


# ----------------------------------------------------- runtime helpers (codecs)


class _Bad(Exception):
    """Malformed input found by a generated decoder (becomes DecodeError)."""


_NUL = b"\x00"
_ZEROS = tuple(bytes(n) for n in range(8))
_ANY = frozenset(range(8))
_ZERO = frozenset({0})
_LENS = {o: tuple(struct.Struct(o + "x" * p + "I") for p in range(4)) for o in "<>"}


def _as_bool(x):
    """``x`` as a bool when it is one (or the int 0 / 1)."""
    if x is True or x is False:
        return x
    if isinstance(x, (int, np.integer, np.bool_)) and x in (0, 1):
        return bool(x)
    raise TypeError(f"expected bool, got {x!r}")


def _seq_list(v):
    """``v`` when it is a sequence of elements (not a str or bytes)."""
    if v.__class__ is list or (hasattr(v, "__len__") and not isinstance(v, (str, bytes, bytearray))):
        return v
    raise TypeError(f"expected a list, got {type(v).__name__}")


def _cast(v, dt):
    """Array ``v`` as dtype ``dt``, refusing lossy conversions."""
    if v.dtype.kind not in "biuf":
        raise TypeError(f"cannot encode a {v.dtype} array as {dt.name}")
    if np.can_cast(v.dtype, dt, "same_kind" if dt.kind == "f" else "safe"):
        return v.astype(dt)
    if v.dtype.kind in "biu" and dt.kind in "iu":
        out = v.astype(dt)
        if np.array_equal(out, v):
            return out
        raise ValueError(f"array values out of range for {dt.name}")
    raise TypeError(f"cannot encode a {v.dtype} array as {dt.name} without losing data")


def _num_conv(t):
    """Converter of a numeric sequence value to ``(bytes-like, count)``."""
    dt = np.dtype("<" + t.dtype)
    fmt = "<%d" + t.code
    one = t.size == 1

    def conv(v):
        if v.__class__ is list or v.__class__ is tuple:
            n = len(v)
            return struct.pack(fmt % n, *v), n
        if one and v.__class__ in (bytes, bytearray):
            return v, len(v)
        if isinstance(v, (str, bytes, bytearray)):
            raise TypeError(f"expected a list or array of {t.name}, got {type(v).__name__}")
        if not isinstance(v, np.ndarray):
            v = np.asarray(v)
        if one:  # raw bytes: any numeric array is sent as its bytes
            if v.dtype.kind not in "biufc":
                raise TypeError(f"cannot encode a {v.dtype} array as {t.name}[]")
        elif v.dtype != dt:
            v = _cast(v, dt)
        a = np.ascontiguousarray(v)
        return a, a.nbytes // t.size

    return conv


def _bool_conv(v):
    """A bool sequence value as ``(bytes of 0/1, count)``."""
    if isinstance(v, (str, bytes)):
        raise TypeError(f"expected a list of bool, got {type(v).__name__}")
    b = bytes(map(_as_bool, v.ravel() if isinstance(v, np.ndarray) else v))
    return b, len(b)


def _put_strs(v, ap, pos, bound, wide=False):
    """Encodes the elements of a string sequence; the new position."""
    lens = _LENS["<"]
    if wide:
        return _put_wstrs(v, ap, pos, bound, lens)
    for s in v:
        b = s.encode()
        if bound is not None and len(b) > bound:
            raise ValueError(f"string longer than {bound} bytes")
        p = -pos & 3
        ap(lens[p].pack(len(b) + 1))
        ap(b)
        ap(_NUL)
        pos += p + 5 + len(b)
    return pos


def _put_wstrs(v, ap, pos, bound, lens):
    """Encodes the elements of a wstring sequence: a count of UTF-16 units,
    then the units; the new position."""
    for s in v:
        b = s.encode("utf-16-le")
        if bound is not None and len(b) // 2 > bound:
            raise ValueError(f"wstring longer than {bound} UTF-16 units")
        p = -pos & 3
        ap(lens[p].pack(len(b) // 2))
        ap(b)
        pos += p + 4 + len(b)
    return pos


def _get_strs(buf, pos, n, L, lens, wide=None):
    """Decodes ``n`` strings (``wide``: wstrings in that codec, e.g.
    ``utf-16-le``); ``(list, new position)``."""
    if n * 4 > L - pos:
        raise _Bad(f"{n} strings cannot fit in {L - pos} bytes")
    out = []
    if wide:
        for _ in range(n):
            s = lens[-pos & 3]
            k, = s.unpack_from(buf, pos)
            pos += s.size
            end = pos + 2 * k
            if end > L:
                raise _Bad(f"wstring of {k} units past the end")
            out.append(str(buf[pos:end], wide))
            pos = end
        return out, pos
    for _ in range(n):
        s = lens[-pos & 3]
        k, = s.unpack_from(buf, pos)
        pos += s.size
        end = pos + k
        if end > L:
            raise _Bad(f"string of {k} bytes past the end")
        out.append(str(buf[pos:end - 1], "utf-8"))
        pos = end
    return out, pos


def _put_msgs(v, ap, pos, enc):
    """Encodes the elements of a message sequence; the new position."""
    for m in v:
        pos = enc(m, ap, pos)
    return pos


def _get_msgs(buf, pos, n, L, dec, min_size):
    """Decodes ``n`` messages; ``(list, new position)``."""
    if n * min_size > L - pos:
        raise _Bad(f"{n} messages cannot fit in {L - pos} bytes")
    out = []
    for _ in range(n):
        m, pos = dec(buf, pos, L)
        out.append(m)
    return out, pos


def _get_bools(buf, pos, n, L):
    """Decodes ``n`` bools (each must be 0 or 1) as a list."""
    if pos + n > L:
        raise _Bad(f"{n} bools past the end")
    b = bytes(buf[pos:pos + n])
    if b.translate(None, b"\x00\x01"):
        raise _Bad("invalid bool value in sequence (must be 0 or 1)")
    return [x == 1 for x in b]


def _as_buffer(data, type_name):
    """``data`` (any buffer-protocol object) as a flat memoryview of bytes."""
    try:
        mv = memoryview(data)
        if not mv.c_contiguous:
            raise TypeError("not C-contiguous")
        if mv.ndim != 1 or mv.format != "B":
            mv = mv.cast("B")
        return mv
    except TypeError as e:
        raise DecodeError(type_name, 0, f"expected a contiguous bytes-like object, got "
                          f"{type(data).__name__} ({e})") from None


def _header_error(type_name, data):
    head = bytes(data[:4]).hex(" ")
    if len(data) < 4:
        return DecodeError(type_name, len(data), f"shorter than the 4-byte CDR header ({head!r})")
    return DecodeError(type_name, len(data), f"unsupported encapsulation header {head} "
                       "(expected 00 01 00 00 or 00 00 00 00: plain CDR)")


def _decode_error(type_name, length, e):
    if isinstance(e, _Bad):
        reason = str(e)
    elif isinstance(e, struct.error):
        reason = f"truncated: {e}"
    elif isinstance(e, UnicodeDecodeError):
        reason = f"invalid UTF-8 in a string: {e}"
    else:
        reason = f"{type(e).__name__}: {e}"
    return DecodeError(type_name, length, reason)


def _decode_be(info, data):
    return info.codec("dec_top", ">")(data)


_HELPERS = {
    "np": np, "_fb": np.frombuffer, "_Bad": _Bad, "_NUL": _NUL, "_ZEROS": _ZEROS,
    "_HDR": CDR_LE_HEADER, "_as_bool": _as_bool, "_seq_list": _seq_list,
    "_bool_conv": _bool_conv, "_put_strs": _put_strs, "_get_strs": _get_strs,
    "_put_msgs": _put_msgs, "_get_msgs": _get_msgs, "_get_bools": _get_bools,
    "_join": b"".join, "_as_buffer": _as_buffer, "_header_error": _header_error,
    "_decode_error": _decode_error, "_decode_be": _decode_be,
}


# ------------------------------------------------------------- code generation


class _Gen:
    """Writes the Python source of one encoder or decoder of one message type.

    It tracks what is known statically about the position: ``known`` is the
    body offset while no variable-length data was seen (then offsets are
    constants), ``res`` the possible body offsets modulo 8. Pending
    fixed-size fields (``run``) become one ``struct.Struct`` whose format
    holds the alignment padding, or a table of 8 of them indexed by the
    position modulo 8 when the padding is not predictable. Encoders append
    bytes to ``parts`` (through ``ap``) and track the body offset in ``pos``;
    decoders read ``buf`` whose body starts at index 4, so ``pos - 4`` is the
    body offset.
    """

    def __init__(self, enc, order, top):
        self.enc, self.order = enc, order
        self.base = 0 if enc else 4
        self.ns = dict(_HELPERS)
        self.lines, self.depth, self.count = [], 1, 0
        self.known = 0 if top else None
        self.res = _ZERO if top else _ANY
        self.run, self.run_res, self.post = [], _ZERO, []
        self.header = enc and top  # encoder still has to write the CDR header
        self.outs, self.dynamic, self.last = 0, False, None
        self.moves = set()  # indices of lines that only advance pos

    def emit(self, line, moves=False):
        """Adds a line; ``moves``: it only advances ``pos`` (pruned when last)."""
        if moves and self.depth == 1:
            self.moves.add(len(self.lines))
        self.lines.append("    " * self.depth + line)

    def var(self, prefix="_v"):
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value, prefix="_K"):
        name = self.var(prefix)
        self.ns[name] = value
        return name

    def head(self):
        """Writes the CDR header if nothing was written yet (encoders)."""
        if self.header:
            self.header = False
            self.out("_HDR")

    def out(self, expr):
        """Appends encoded bytes ``expr`` to the output."""
        self.head()
        self.outs += 1
        self.last = (len(self.lines), expr)
        self.emit(f"ap({expr})")

    def pos(self):
        """Expression of the current position (in the encoder or decoder's terms)."""
        return "pos" if self.known is None else str(self.known + self.base)

    def materialize(self):
        """Makes the variable ``pos`` hold the current position."""
        if self.known is not None:
            self.emit(f"pos = {self.known + self.base}", moves=True)
            self.known = None

    def skip(self, n, size_expr=None):
        """Advances by ``n`` bytes (or ``size_expr`` when not a constant)."""
        if self.known is not None and size_expr is None:
            self.known += n
        else:
            self.emit(f"pos += {size_expr or n}", moves=True)

    def item(self, size, code, arg):
        """Adds a fixed-size field (struct ``code``) to the pending run."""
        if not self.run:
            self.run_res = self.res
        self.run.append((size, code, arg))

    def flush(self):
        """Writes the pending run as one struct pack / unpack."""
        run, self.run = self.run, []
        if not run:
            return
        fmts = {}
        for r0 in self.run_res:
            off, fmt = r0, []
            for size, code, _ in run:
                pad = -off % size
                fmt.append("x" * pad + code)
                off += pad + size
            fmts[r0] = (self.order + "".join(fmt), off - r0)
        self.res = frozenset((r0 + n) % 8 for r0, (_, n) in fmts.items())
        args = [a for _, code, a in run if code != "x"]
        if len(fmts) == 1:
            (fmt, n), = fmts.values()
            if self.header:
                self.header = False
                fmt, args = fmt[0] + "4s" + fmt[1:], ["_HDR"] + args
            s, size_expr = self.const(struct.Struct(fmt), "_S"), None
        else:
            table = tuple(struct.Struct(fmts[r][0]) if r in fmts else None for r in range(8))
            s, n, size_expr = "_s", 0, "_s.size"
            mod = "pos" if self.base % 8 == 0 else f"(pos + {-self.base % 8})"
            self.emit(f"_s = {self.const(table, '_T')}[{mod} & 7]")
        if self.enc:
            self.out(f"{s}.pack({', '.join(args)})")
        elif args:
            self.emit(f"{', '.join(args)}, = {s}.unpack_from(buf, {self.pos()})")
        else:
            self.emit(f"{s}.unpack_from(buf, {self.pos()})")
        self.skip(n, size_expr)
        for line in self.post:
            self.emit(line)
        self.post = []

    def align(self, e):
        """Pads to a multiple of ``e`` (the pending run must be flushed)."""
        pads = {-r % e for r in self.res}
        self.res = frozenset((r + -r % e) % 8 for r in self.res)
        if len(pads) == 1:
            p = pads.pop()
            if p and self.enc:
                self.out(self.const(bytes(p), "_Z"))
            if p:
                self.skip(p)
        elif self.enc:
            self.emit(f"_p = -pos & {e - 1}")
            self.out("_ZEROS[_p]")
            self.emit("pos += _p")
        else:
            self.emit(f"pos += (4 - pos) & {e - 1}")

    def block(self, cond):
        """Opens ``if cond:``; the caller resets ``depth``."""
        self.emit(f"if {cond}:")
        self.depth += 1

    # -- walking the fields

    def walk(self, info, src):
        """Emits the code of the fields of ``info``; ``src`` names the message
        (encoder). Returns the expression that builds the message (decoder)."""
        if not info.fields:  # ROS 2's structure_needs_at_least_one_member
            self.item(1, "x", None)
            return f"{self.const(info.cls, '_C')}()"
        args = [self.field(t, f"{src}.{name}", f"{info.short}.{name}") for name, t in info.fields]
        return None if self.enc else f"{self.const(info.cls, '_C')}({', '.join(args)})"

    def field(self, t, val, where):
        """Emits one field; ``val`` is its value (encoder). Returns the
        decoder's expression of the value."""
        if isinstance(t, _Prim):
            if not self.enc:
                v = self.var()
                self.item(t.size, t.dcode, v)
                if t.kind == "bool":
                    self.post.append(f"if {v} > 1: raise _Bad('{where}: invalid bool value %d' % {v})")
                    return f"{v} == 1"
                return v
            if t.kind == "bool":
                v = self.var()
                self.emit(f"{v} = {val}")
                self.emit(f"if {v}.__class__ is not bool: {v} = _as_bool({v})")
                val = v
            self.item(t.size, t.code, val)
            return None
        if isinstance(t, _String):
            return self.string(t, val, where)
        if isinstance(t, (_Seq, _Array)):
            return self.collection(t, val, where)
        if self.enc:  # nested message: its fields inline
            m = self.var("_m")
            self.emit(f"{m} = {val}")
            val = m
        return self.walk(t.__ferry_info__, val)

    def string(self, t, val, where):
        """A ``string`` (a count of bytes with the NUL, the UTF-8 bytes, a NUL)
        or a ``wstring`` (a count of UTF-16 code units, then the units)."""
        wide = t.wide
        if self.enc:
            b = self.var("_b")
            self.emit(f"{b} = {val}.encode({repr('utf-16-le') if wide else ''})")
            if t.bound is not None:
                limit, unit = (2 * t.bound, "UTF-16 units") if wide else (t.bound, "bytes")
                self.emit(f"if len({b}) > {limit}: "
                          f"raise ValueError('{where}: longer than {t.bound} {unit}')")
            self.item(4, "I", f"len({b}) // 2" if wide else f"len({b}) + 1")
            self.flush()
            self.out(b)
            if not wide:
                self.out("_NUL")
            self.dynamic = True
            size = f"len({b})" if wide else f"len({b}) + 1"
            if self.known is not None:
                self.emit(f"pos = {self.known} + {size}", moves=True)
                self.known = None
            else:
                self.emit(f"pos += {size}", moves=True)
            self.res = _ANY
            return None
        n, v = self.var("_n"), self.var()
        self.item(4, "I", n)
        self.flush()
        self.materialize()
        what = "wstring of %d units" if wide else "string of %d bytes"
        self.emit(f"end = pos + {'2 * ' if wide else ''}{n}")
        self.emit(f"if end > L: raise _Bad('{where}: {what} past the end' % {n})")
        if wide:
            codec = "utf-16-le" if self.order == "<" else "utf-16-be"
            self.emit(f"{v} = str(buf[pos:end], '{codec}')")
        else:
            self.emit(f"{v} = str(buf[pos:end - 1], 'utf-8')")
        self.emit("pos = end", moves=True)
        self.res = _ANY
        return v

    def collection(self, t, val, where):
        """A sequence or a fixed array."""
        elem, seq = t.elem, isinstance(t, _Seq)
        if _numeric(elem) or elem is bool_:
            return self.numbers(t, val, where)
        if self.enc:
            s = self.var("_l")
            self.emit(f"{s} = _seq_list({val})")
            if seq:
                if t.bound is not None:
                    self.emit(f"if len({s}) > {t.bound}: "
                              f"raise ValueError('{where}: more than {t.bound} elements')")
                self.item(4, "I", f"len({s})")
            else:
                self.emit(f"if len({s}) != {t.n}: raise ValueError('{where}: needs {t.n} elements')")
            self.flush()
            self.materialize()
            self.head()
            self.dynamic = True
            if isinstance(elem, _String):
                self.emit(f"pos = _put_strs({s}, ap, pos, {elem.bound}, {elem.wide})")
            else:
                enc = self.const(elem.__ferry_info__.codec("enc_any", "<"), "_E")
                self.emit(f"pos = _put_msgs({s}, ap, pos, {enc})")
            self.res = _ANY
            return None
        if seq:
            n = self.var("_n")
            self.item(4, "I", n)
        else:
            n = str(t.n)
        self.flush()
        self.materialize()
        v = self.var()
        if isinstance(elem, _String):
            lens = self.const(_LENS[self.order], "_L")
            wide = ("'utf-16-le'" if self.order == "<" else "'utf-16-be'") if elem.wide else None
            self.emit(f"{v}, pos = _get_strs(buf, pos, {n}, L, {lens}, {wide})")
        else:
            info = elem.__ferry_info__
            dec = self.const(info.codec("dec_any", self.order), "_D")
            self.emit(f"{v}, pos = _get_msgs(buf, pos, {n}, L, {dec}, {info.min_size})")
        self.res = _ANY
        return v

    def numbers(self, t, val, where):
        """A sequence or array of numbers or bools: one block of bytes."""
        elem, seq = t.elem, isinstance(t, _Seq)
        e = elem.size
        if self.enc:
            b, n = self.var("_b"), self.var("_n")
            conv = "_bool_conv" if elem is bool_ else self.const(_num_conv(elem), "_F")
            self.emit(f"{b}, {n} = {conv}({val})")
            if seq and t.bound is not None:
                self.emit(f"if {n} > {t.bound}: raise ValueError('{where}: more than {t.bound} elements')")
            elif not seq:
                self.emit(f"if {n} != {t.n}: raise ValueError('{where}: needs {t.n} elements, got %d' % {n})")
        else:
            n = self.var("_n") if seq else str(t.n)
        if seq:
            self.item(4, "I", n)
        self.flush()
        if seq:  # elements (and their padding) only when there are some
            self.materialize()
            before, depth = self.res, self.depth
            self.block(n)
        self.align(e)
        aligned = self.res
        size = (n if e == 1 else f"{n} * {e}") if seq else t.n * e
        if self.enc:
            self.out(b)
        else:
            v, start = self.var(), self.pos()
            self.emit(f"if {start} + {size} > L: raise _Bad('{where}: %d elements past the end' % {n})")
            if elem is bool_:
                self.emit(f"{v} = _get_bools(buf, {start}, {n}, L)")
            else:
                dt = self.const(np.dtype(self.order + elem.dtype), "_dt")
                self.emit(f"{v} = _fb(buf, {dt}, {n}, {start})")
        if seq:
            self.emit(f"pos += {size}")
            self.depth = depth
            if not self.enc:
                empty = "[]" if elem is bool_ else f"_fb(buf, {dt}, 0, pos)"
                self.emit("else:")
                self.emit(f"    {v} = {empty}")
            self.res = before | {(r + k * e) % 8 for r in aligned for k in range(1, 9)}
        else:
            self.skip(t.n * e)
            self.res = frozenset((r + t.n * e) % 8 for r in aligned)
        return None if self.enc else v
