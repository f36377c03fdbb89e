"""Message types declared in Python, encoded as CDR exactly like ferry's Rust side.

A message is a class with ROS field types::

    from ferry.idl import message, float64, sequence, string, uint8

    @message("geometry_msgs/msg/Vector3")
    class Vector3:
        x: float64 = 0.0
        y: float64 = 0.0
        z: float64 = 0.0

    data = Vector3(1.0, 2.0, 3.0).encode()      # or Vector3.encode(v)
    v = Vector3.decode(data)                    # any bytes-like object

Field types: ``bool_ byte char int8 uint8 int16 uint16 int32 uint32 int64
uint64 float32 float64 string wstring``, ``string(max=N)`` (``string<=N``),
``sequence(T)`` (``T[]``), ``sequence(T, max=N)`` (``T[<=N]``), ``array(T, N)``
(``T[N]``) and other message classes. ``byte`` and ``char`` are unsigned 8-bit
integers. Bounds are checked on encode only.

Payloads are plain CDR (XCDR1), as ``cdr-encoding`` writes them on the Rust
side: the encapsulation header ``00 01 00 00`` (little endian) and the body.
Every primitive is aligned to its own size relative to the body start (padding
is zero); strings are a ``uint32`` length (with the NUL), the UTF-8 bytes and a
NUL; sequences a ``uint32`` count and the elements; fixed arrays only the
elements; nested messages are inlined; a message without fields is one zero
byte. Decoding also accepts big-endian bodies (``00 00`` header) and ignores
trailing bytes, like the Rust side.

Numeric sequences and arrays decode to ``numpy`` arrays that are views of the
input buffer, not copies (read-only when the input is ``bytes``; big-endian
input gives big-endian dtypes); ``bool`` and ``string`` ones decode to lists.
On encode they take numpy arrays, lists, tuples, and for 8-bit types also
bytes-like objects (any numeric array is then sent as its raw bytes).

Each class gets an encoder and a decoder generated as Python source (see
``ferry._cdr``): fixed-size fields that follow each other are packed by one
precompiled ``struct.Struct`` with the alignment padding folded into its
format; where the padding depends on data seen before (after a string), the
struct is picked from a table by the position modulo 8.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import linecache
import operator
import reprlib
import struct
import typing

import numpy as np

from ._cdr import (  # noqa: F401 - re-exported field types
    CDR_LE_HEADER, DecodeError, EncodeError, _Array, _Prim, _Seq, _String, _as_bool, _bool_conv,
    _num_conv, _numeric, _positive, _seq_list, _Gen, bool_, byte, char, float32, float64,
    int8, int16, int32, int64, string, uint8, uint16, uint32, uint64, wstring,
)

__all__ = [
    "CDR_LE_HEADER", "DecodeError", "EncodeError", "message", "service", "fields",
    "is_message", "is_service", "sequence", "array", "bool_", "byte", "char",
    "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float32", "float64", "string", "wstring",
]

DecodeError.__module__ = EncodeError.__module__ = __name__


def _check_elem(t):
    if isinstance(t, (_Prim, _String)) or is_message(t):
        return t
    raise TypeError(f"element type must be a primitive, string or @message class, got {t!r}")


def sequence(t, max=None):  # noqa: A002
    """Sequence field type ``T[]``, or ``T[<=max]`` when ``max`` is given."""
    return _Seq(_check_elem(t), None if max is None else _positive(max, "sequence bound"))


def array(t, n):
    """Fixed-size array field type ``T[n]``."""
    return _Array(_check_elem(t), _positive(n, "array length"))


def is_message(obj) -> bool:
    """Whether ``obj`` is a class made by :func:`message`."""
    return isinstance(obj, type) and isinstance(obj.__dict__.get("__ferry_info__"), _Info)


def is_service(obj) -> bool:
    """Whether ``obj`` is a class made by :func:`service`."""
    return isinstance(obj, type) and obj.__dict__.get("__ferry_service__") is True


def fields(cls):
    """The ``(name, type)`` pairs of a message class, in wire order."""
    cls = cls if isinstance(cls, type) else type(cls)
    if not is_message(cls):
        raise TypeError(f"{cls!r} is not a @message class")
    return tuple(cls.__ferry_info__.fields)


def _ros_name(t, pkg):
    """The type as written in a ``.msg`` definition."""
    if isinstance(t, (_Prim, _String)):
        return repr(t)
    if isinstance(t, _Seq):
        return _ros_name(t.elem, pkg) + ("[]" if t.bound is None else f"[<={t.bound}]")
    if isinstance(t, _Array):
        return f"{_ros_name(t.elem, pkg)}[{t.n}]"
    info = t.__ferry_info__
    return info.short if info.pkg == pkg else f"{info.pkg}/{info.short}"


def _min_size(t):
    """A lower bound of the encoded size (bounds loops over untrusted counts)."""
    if isinstance(t, _Prim):
        return t.size
    if isinstance(t, (_String, _Seq)):
        return 4
    if isinstance(t, _Array):
        return t.n * _min_size(t.elem)
    return t.__ferry_info__.min_size


# ------------------------------------------------------------ message classes


class _Info:
    """What ferry knows of one message class: its name, fields, ``.msg``
    definition and (compiled on demand) codecs."""

    def __init__(self, cls, type_name, flds):
        self.cls, self.type_name, self.fields = cls, type_name, flds
        parts = type_name.split("/")
        self.pkg, self.short = parts[0], parts[-1]
        self.definition = "\n".join(f"{_ros_name(t, self.pkg)} {name}" for name, t in flds)
        self.min_size = sum(_min_size(t) for _, t in flds) or 1
        self._codecs = {}

    def codec(self, kind, order="<"):
        """The compiled codec ``kind`` (see :func:`_build`) for byte ``order``."""
        fn = self._codecs.get((kind, order))
        if fn is None:
            fn = self._codecs[(kind, order)] = _build(self, kind, order)
        return fn

    def encode_failed(self, msg, err):
        """Raises the EncodeError that explains why encoding ``msg`` failed."""
        found = _problem(self.cls, msg, "")
        if found is None:
            raise EncodeError(self.type_name, "?", f"{type(err).__name__}: {err}") from None
        raise EncodeError(self.type_name, found[0] or "<message>", found[1]) from None


# ------------------------------------------------------- compiling the codecs

_TEMPLATES = {
    "enc_top": ("def encode(m):", "    try:", "        parts = []", "        ap = parts.append"),
    "enc_any": ("def enc_any(m, ap, pos):",),
    "dec_top<": (
        "def decode(data):",
        "    if data.__class__ is not bytes:",
        "        data = _as_buffer(data, _TYPE)",
        "    L = len(data)",
        "    if L < 4 or data[0] or data[1] > 1:",
        "        raise _header_error(_TYPE, data)",
        "    if not data[1]:",
        "        return _decode_be(_INFO, data)",
        "    buf = data",
        "    try:",
    ),
    "dec_top>": ("def decode(buf):", "    L = len(buf)", "    try:"),
    "dec_any": ("def dec_any(buf, pos, L):",),
}


def _build(info, kind, order):
    """Compiles one codec of ``info`` (an ``idl._Info``): ``kind`` is
    ``enc_top`` (the public encoder), ``enc_any`` (encodes at any position,
    for sequence elements), ``dec_top`` (the public decoder) or ``dec_any``;
    ``order`` is ``<`` or ``>`` (decoders only)."""
    enc, top = kind.startswith("enc"), kind.endswith("top")
    g = _Gen(enc, order, top)
    made = g.walk(info, "m")
    g.flush()
    body = g.lines
    while top and len(body) - 1 in g.moves:
        g.moves.discard(len(body) - 1)
        body.pop()  # the position after the last field is not needed
    if enc and top and g.outs == 1 and not g.dynamic:  # one struct: its bytes
        i, expr = g.last
        body[i] = f"    return {expr}"
        head = ("def encode(m):", "    try:")
    else:
        head = _TEMPLATES[kind + order if kind == "dec_top" else kind]
    if top:  # bodies run inside try:
        body = ["    " + line for line in body]
    if kind == "enc_top":
        if len(head) > 2:
            body.append("        return _join(parts)")
        body += ["    except Exception as e:", "        _fail(m, e)"]
    elif kind == "enc_any":
        body.append("    return pos")
    elif kind == "dec_top":
        body += [f"        return {made}", "    except Exception as e:",
                 "        raise _decode_error(_TYPE, L, e) from None"]
    else:
        body.append(f"    return {made}, pos")
    src = "\n".join(head + tuple(body)) + "\n"
    name = f"<ferry.idl {kind}{order} {info.type_name}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    g.ns.update(_TYPE=info.type_name, _INFO=info, _fail=info.encode_failed)
    exec(compile(src, name, "exec"), g.ns)  # noqa: S102 - our own generated source
    fn = g.ns[head[0][4:head[0].index("(")]]
    fn.__ferry_source__ = src
    return fn


def _problem(t, v, path):
    """``(path, reason)`` of the first part of ``v`` that cannot be encoded
    as ``t``, or None (the slow path behind encode's error messages)."""
    if is_message(t):
        for name, ft in t.__ferry_info__.fields:
            sub = f"{path}.{name}" if path else name
            try:
                fv = getattr(v, name)
            except AttributeError:
                return sub, f"missing on {reprlib.repr(v)} (a {type(v).__name__})"
            found = _problem(ft, fv, sub)
            if found:
                return found
        return None
    try:
        if isinstance(t, _Prim):
            _check_prim(t, v)
        elif isinstance(t, _String) and t.wide:
            n = len(_check_type(v, str, "str").encode("utf-16-le")) // 2
            if t.bound is not None and n > t.bound:
                return path, f"{n} UTF-16 units, longer than the bound {t.bound}"
        elif isinstance(t, _String):
            b = _check_type(v, str, "str").encode()
            if t.bound is not None and len(b) > t.bound:
                return path, f"{len(b)} bytes, longer than the bound {t.bound}"
        else:
            elem = t.elem
            if elem is bool_:
                n = _bool_conv(v)[1]
            elif _numeric(elem):
                n = _num_conv(elem)(v)[1]
            else:
                n = len(_seq_list(v))
            if isinstance(t, _Seq) and t.bound is not None and n > t.bound:
                return path, f"{n} elements, more than the bound {t.bound}"
            if isinstance(t, _Array) and n != t.n:
                return path, f"a {t!r} needs {t.n} elements, got {n}"
            if isinstance(elem, _String) or is_message(elem):
                for i, x in enumerate(v):
                    found = _problem(elem, x, f"{path}[{i}]")
                    if found:
                        return found
    except Exception as e:  # noqa: BLE001 - any failure is the reason
        return path, str(e) or type(e).__name__
    return None


def _check_type(v, cls, what):
    if not isinstance(v, cls):
        raise TypeError(f"expected {what}, got {type(v).__name__} {reprlib.repr(v)}")
    return v


def _check_prim(t, v):
    """Raises when ``v`` is not a valid value of primitive ``t``."""
    if t.kind == "bool":
        _as_bool(v)
    elif t.kind == "int":
        if isinstance(v, (float, str, bytes)) or not hasattr(type(v), "__index__"):
            raise TypeError(f"expected int ({t.name}), got {type(v).__name__} {reprlib.repr(v)}")
        i = operator.index(v)
        if not t.lo <= i <= t.hi:
            raise ValueError(f"{i} is out of range for {t.name} [{t.lo}, {t.hi}]")
    else:
        if isinstance(v, (str, bytes)):
            raise TypeError(f"expected float ({t.name}), got {type(v).__name__} {reprlib.repr(v)}")
        struct.pack("<" + t.code, v)  # non-numbers, float32 overflow


def _default(t, given):
    """The dataclass default of a field of type ``t`` (``given`` in the class, if any)."""
    if isinstance(given, dataclasses.Field):
        return given
    if given is not dataclasses.MISSING:
        if given is None or isinstance(given, (bool, int, float, str, bytes)):
            return given
        return dataclasses.field(default_factory=lambda: copy.deepcopy(given))
    if isinstance(t, _Prim):
        return t.default
    if isinstance(t, _String):
        return ""
    if isinstance(t, _Seq):
        return dataclasses.field(default_factory=list)
    if isinstance(t, _Array):
        elem, n = t.elem, t.n
        if _numeric(elem):
            dt = np.dtype("<" + elem.dtype)
            return dataclasses.field(default_factory=lambda: np.zeros(n, dt))
        if is_message(elem):
            return dataclasses.field(default_factory=lambda: [elem() for _ in range(n)])
        one = False if elem is bool_ else ""
        return dataclasses.field(default_factory=lambda: [one] * n)
    return dataclasses.field(default_factory=t)  # nested message


def _as_array(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return np.frombuffer(v, np.uint8)
    return np.asarray(v)


def _values_eq(a, b):
    """Equality of two sequence values, any of them possibly a numpy array."""
    if a is b:
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    try:
        return bool(np.array_equal(_as_array(a), _as_array(b)))
    except (TypeError, ValueError):
        return False


def _make_eq(flds):
    seqs = [(name, isinstance(t, (_Seq, _Array))) for name, t in flds]

    def __eq__(self, other):
        """Field-by-field equality (arrays compare by value)."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        for name, seq in seqs:
            a, b = getattr(self, name), getattr(other, name)
            if not (_values_eq(a, b) if seq else a == b):
                return False
        return True

    return __eq__


_RESERVED = {"encode", "decode"}


def message(type_name: str):
    """Class decorator: a message type named ``type_name`` (``pkg/msg/Name``)
    whose fields are the class annotations (ferry.idl field types or other
    message classes), in order.

    The class becomes a dataclass (every field has a default: zero, ``""``,
    an empty list, a default message) and gets ``__ferry_type__ = (type_name,
    definition)``, ``encode(msg) -> bytes`` (also ``msg.encode()``) and
    ``decode(data) -> msg`` (``data``: any bytes-like object; numeric
    sequences in the result are numpy views of it). Encoding raises
    :class:`EncodeError`, decoding :class:`DecodeError`.
    """
    parts = type_name.split("/") if isinstance(type_name, str) else []
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        raise ValueError(f"message type name must look like 'pkg/msg/Name', got {type_name!r}")

    def wrap(cls):
        return _make_message(cls, type_name)

    return wrap


def _make_message(cls, type_name):
    try:
        annotations = inspect.get_annotations(cls, eval_str=True)
    except Exception as e:  # noqa: BLE001
        raise TypeError(f"{cls.__qualname__}: cannot resolve the field annotations: {e}") from None
    flds = []
    for name, t in annotations.items():
        if t is typing.ClassVar or typing.get_origin(t) is typing.ClassVar:
            continue
        if not (isinstance(t, (_Prim, _String, _Seq, _Array)) or is_message(t)):
            raise TypeError(f"{cls.__qualname__}.{name}: {t!r} is not a field type (use "
                            "ferry.idl's int32, float64, string, sequence(...), array(...) "
                            "or a @message class)")
        if name in _RESERVED or name.startswith("__"):
            raise TypeError(f"{cls.__qualname__}.{name}: this field name is reserved")
        flds.append((name, t))
        setattr(cls, name, _default(t, cls.__dict__.get(name, dataclasses.MISSING)))
    cls = dataclasses.dataclass(cls, eq=False)
    info = _Info(cls, type_name, flds)
    cls.__ferry_info__ = info
    cls.__ferry_type__ = (type_name, info.definition)
    cls.__eq__ = _make_eq(flds)
    cls.__hash__ = None
    enc, dec = info.codec("enc_top"), info.codec("dec_top")
    enc.__qualname__, dec.__qualname__ = f"{cls.__qualname__}.encode", f"{cls.__qualname__}.decode"
    enc.__doc__ = f"Encodes a {type_name} as CDR (with the 4-byte header); raises EncodeError."
    dec.__doc__ = f"Decodes CDR bytes (any buffer) into a {type_name}; raises DecodeError."
    cls.encode = enc
    cls.decode = staticmethod(dec)
    return cls


def service(type_name: str):
    """Class decorator: a service type named ``type_name`` (``pkg/srv/Name``)
    whose nested ``Request`` and ``Response`` are :func:`message` classes.
    Sets ``__ferry_service__ = True`` and ``__ferry_service_type__``."""

    def wrap(cls):
        for part in ("Request", "Response"):
            if not is_message(getattr(cls, part, None)):
                raise TypeError(f"service {type_name}: {cls.__qualname__}.{part} must be a "
                                "@message class")
        cls.__ferry_service__ = True
        cls.__ferry_service_type__ = type_name
        return cls

    return wrap
