"""ROS 2 interfaces as Python classes, made at run time from their ``.msg``,
``.srv`` and ``.action`` definitions: the common interfaces ferry ships
(std_msgs, geometry_msgs, sensor_msgs, nav_msgs, …) and every package in
the folders of ``FERRY_INTERFACE_PATH`` (or a ROS 2 install on
``AMENT_PREFIX_PATH``) — the same definitions, parser and type hashes as
ferry's Rust side, so both encode the same bytes::

    from ferry.msgs.geometry_msgs import Twist          # a message
    from ferry.msgs.geometry_msgs.msg import Twist      # the same class
    from ferry.msgs.example_interfaces import AddTwoInts  # a service
    from ferry.msgs import std_msgs                     # a package
    ferry.msgs.get("my_robot_msgs/msg/ArmCommand")     # by full name

A message class is a :func:`ferry.idl.message` class: fields with ROS 2's
defaults, constants as class attributes (``PointField.FLOAT32``), numeric
sequences decoded as numpy views. A service class has ``Request`` and
``Response``; an action class ``Goal``, ``Result``, ``Feedback``,
``FeedbackMessage``, ``SendGoal`` and ``GetResult``. Classes are made on
first use and cached.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import types

from .. import _ferry
from ..idl import (
    array, bool_, byte, char, float32, float64, int8, int16, int32, int64, message, sequence,
    service, string, uint8, uint16, uint32, uint64, wstring,
)

__all__ = ["get", "packages"]

_PRIMS = {p.name: p for p in (bool_, byte, char, float32, float64, int8, int16, int32, int64,
                              uint8, uint16, uint32, uint64)}
_EMPTY_MEMBER = "structure_needs_at_least_one_member"
_KINDS = ("msg", "srv", "action")

_lock = threading.RLock()
_classes: dict = {}
_making: set = set()


def _declared():
    """``{package: {kind: [short names]}}`` of every declared interface."""
    out: dict = {}
    for full, kind in _ferry.interface_list():
        pkg, _, short = full.split("/")
        out.setdefault(pkg, {}).setdefault(kind, []).append(short)
    return out


def packages():
    """The packages whose interfaces this process knows, sorted."""
    return sorted(_declared())


def _field_type(spec):
    base, bound, coll, n = spec
    if base in _PRIMS:
        t = _PRIMS[base]
    elif base in ("string", "wstring"):
        t = string if base == "string" else wstring
        t = t if bound is None else t(max=bound)
    else:
        t = get(base)
    if coll == "single":
        return t
    if coll == "array":
        return array(t, n)
    return sequence(t, max=n if coll == "bounded" else None)


def _make_message(full):
    info = _ferry.interface(full)
    pkg, kind, short = full.split("/")
    ns = {
        "__annotations__": {},
        "__doc__": f"``{full}``, made from its definition (``ferry interface show {full}``).",
        "__module__": f"{__name__}.{pkg}.{kind}",
        "__qualname__": short,
    }
    fields = info["fields"]
    if len(fields) == 1 and fields[0][0] == _EMPTY_MEMBER:
        fields = []  # the Python codec writes ROS 2's one padding byte itself
    for name, spec, default in fields:
        ns["__annotations__"][name] = _field_type(spec)
        if default is not None:
            ns[name] = default
    for name, _spec, value in info["constants"]:
        ns[name] = value
    cls = message(full)(type(short, (), ns))
    # The definition is the loaded one: discovery announces its RIHS01.
    cls.__ferry_type__ = (full, "")
    return cls


def _make_service(full):
    pkg, kind, short = full.split("/")
    ns = {
        "__doc__": f"``{full}``: ``Request`` answered by ``Response``.",
        "__module__": f"{__name__}.{pkg}.{kind}",
        "__qualname__": short,
        "Request": get(f"{full}_Request"),
        "Response": get(f"{full}_Response"),
    }
    return service(full)(type(short, (), ns))


def _make_action(full):
    pkg, kind, short = full.split("/")
    ns = {
        "__doc__": f"``{full}``: ``Goal``, ``Result`` and ``Feedback``, and the parts ROS 2 "
                   "builds an action from.",
        "__module__": f"{__name__}.{pkg}.{kind}",
        "__qualname__": short,
        "__ferry_action_type__": full,
    }
    for part in ("Goal", "Result", "Feedback", "FeedbackMessage"):
        ns[part] = get(f"{full}_{part}")
    for part in ("SendGoal", "GetResult"):
        ns[part] = _make_service(f"{full}_{part}")
    return type(short, (), ns)


def get(full: str):
    """The class of interface ``full``: a message (``pkg/msg/Name``, or a part
    such as ``pkg/srv/Name_Request``), a service (``pkg/srv/Name``) or an
    action (``pkg/action/Name``). Raises ``KeyError`` for an unknown one."""
    with _lock:
        cls = _classes.get(full)
        if cls is not None:
            return cls
        if full in _making:
            raise TypeError(f"{full} contains itself: it cannot be a Python class")
        _making.add(full)
        try:
            parts = full.split("/")
            if len(parts) != 3 or parts[1] not in _KINDS:
                raise KeyError(f"{full!r}: write a full name, e.g. 'std_msgs/msg/String'")
            # (A service's and an action's own type descriptions are loaded
            # as messages too, for hashing: the class is the service's.)
            if parts[1] == "srv" and _ferry.interface_known(f"{full}_Request"):
                cls = _make_service(full)
            elif parts[1] == "action" and _ferry.interface_known(f"{full}_Goal"):
                cls = _make_action(full)
            elif _ferry.interface_known(full):
                cls = _make_message(full)
            else:
                raise KeyError(f"unknown interface {full!r} (ferry ships ROS 2's common "
                               "interfaces; add your packages' folder to FERRY_INTERFACE_PATH)")
        finally:
            _making.discard(full)
        _classes[full] = cls
        return cls


class _Folder(types.ModuleType):
    """``ferry.msgs.<pkg>.msg`` (or ``srv``, ``action``): its classes, made on use."""

    def __init__(self, name, pkg, kind, names):
        super().__init__(name, f"``{pkg}/{kind}`` interfaces.")
        self._pkg, self._kind, self._names = pkg, kind, sorted(names)
        self.__all__ = list(self._names)

    def __getattr__(self, short):
        if short.startswith("__") or short not in self._names:
            raise AttributeError(f"module {self.__name__!r} has no interface {short!r}")
        cls = get(f"{self._pkg}/{self._kind}/{short}")
        setattr(self, short, cls)
        return cls

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._names))


class _Package(types.ModuleType):
    """``ferry.msgs.<pkg>``: its ``msg``, ``srv`` and ``action`` folders, and
    every interface by its short name (messages first)."""

    def __init__(self, name, pkg, kinds):
        super().__init__(name, f"The ``{pkg}`` interfaces.")
        self._pkg, self._kinds = pkg, kinds
        self.__path__ = []  # a package: its folders import as submodules
        self.__all__ = sorted({n for names in kinds.values() for n in names})

    def __getattr__(self, short):
        if short.startswith("__"):
            raise AttributeError(short)
        for kind in _KINDS:
            if short in self._kinds.get(kind, ()):
                cls = get(f"{self._pkg}/{kind}/{short}")
                setattr(self, short, cls)
                return cls
        raise AttributeError(f"package {self._pkg!r} has no interface {short!r} "
                             f"(it has: {', '.join(self.__all__)})")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__all__))


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``ferry.msgs.<pkg>`` and ``ferry.msgs.<pkg>.<kind>``."""

    def find_spec(self, fullname, path=None, target=None):
        parts = fullname.split(".")
        if parts[:2] != ["ferry", "msgs"] or len(parts) not in (3, 4):
            return None
        declared = _declared()
        pkg = declared.get(parts[2])
        if pkg is None or (len(parts) == 4 and parts[3] not in pkg):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=len(parts) == 3)

    def create_module(self, spec):
        parts = spec.name.split(".")
        kinds = _declared()[parts[2]]
        if len(parts) == 3:
            return _Package(spec.name, parts[2], kinds)
        return _Folder(spec.name, parts[2], parts[3], kinds[parts[3]])

    def exec_module(self, module):
        if isinstance(module, _Package):
            for kind in module._kinds:
                setattr(module, kind, importlib.import_module(f"{module.__name__}.{kind}"))


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.append(_Finder())


def __getattr__(name):
    """``ferry.msgs.<pkg>`` without an import statement."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"no interface package {name!r} (known: "
                             f"{', '.join(packages())})") from None


def __dir__():
    return sorted(set(globals()) | set(packages()))
