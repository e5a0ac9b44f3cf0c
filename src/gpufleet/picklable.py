"""Compiled objects travel by pickle like the sources' do.

Why: a tune worker sends its simulated runs back by pickle (the jobs, the meter, the placement
cluster), and a study sends its worker processes the simulator's configuration. Compiled with mypyc
(``gpufleet.compiled``), those classes leave pickle's default protocol two ways short: a frozen
dataclass's state is set back through its ``__setattr__``, which refuses (``FrozenInstanceError``),
and a plain class's ``__new__`` runs its ``__init__``, with no arguments there. So the plain classes
that travel define a ``__new__`` of their own, which mypyc leaves bare (its
``@mypyc_attr(serializable=True)`` would too, but then an instance made from interpreted code is
never initialized: mypyc 2.4.1, mypyc/mypyc#1172), and this module gives every compiled class one
reducer, registered with ``copyreg`` as modules are imported: the object is rebuilt bare and its
attributes set past any ``__setattr__``, as ``dataclasses`` itself sets a frozen instance's fields.
A compiled module importing another of its group initializes it inside the group's library, unseen
by Python's import system, so after each module Python loads, every compiled module now loaded is
swept (``sweep``); the compiled packages import nothing inside functions, so none is initialized
later unswept.

From source (``GPUFLEET_PURE=1``, a wheel) nothing is installed: Python's own protocol does it.
"""

from __future__ import annotations

import copyreg
import enum
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

ATTRS = "__mypyc_attrs__"  # the attributes mypyc stores in each compiled instance, by class
Native = importlib.machinery.ExtensionFileLoader  # what loads a compiled module


def rebuild(cls: type[object], state: dict[str, Any]) -> object:
    """An instance of ``cls`` made bare, then given ``state`` (``object.__setattr__``: a frozen
    dataclass's own refuses)."""
    made = cls.__new__(cls)
    for name, value in state.items():
        object.__setattr__(made, name, value)
    return made


def reduce(obj: object) -> tuple[Any, ...]:
    """``obj`` as pickle stores it: its class and every attribute it has set."""
    cls = type(obj)
    state = {name: getattr(obj, name) for name in getattr(cls, ATTRS) if name != "__dict__" and hasattr(obj, name)}
    state.update(getattr(obj, "__dict__", {}))
    return rebuild, (cls, state)


def register(module: ModuleType) -> list[type]:
    """Give each compiled class defined in ``module`` the reducer (enums and exceptions keep their own)."""
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and value.__module__ == module.__name__
        and hasattr(value, ATTRS)
        and not issubclass(value, enum.Enum | BaseException)
    ]
    for cls in found:
        if copyreg.dispatch_table.get(cls) is not reduce:
            copyreg.pickle(cls, reduce)
    return found


def sweep(packages: Sequence[str]) -> None:
    """``register`` every compiled module under ``packages`` now loaded. Each module again: one
    swept while it was still being initialized (an import of its own was under way) held only part
    of its classes."""
    for name, module in list(sys.modules.items()):
        if _under(name, packages) and isinstance(getattr(module.__spec__, "loader", None), Native | _Registering):
            register(module)


def _under(name: str, packages: Sequence[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


class _Registering(importlib.abc.Loader):
    """An extension module's own loader, then ``sweep``: it and the modules it initialized."""

    def __init__(self, inner: importlib.machinery.ExtensionFileLoader, packages: Sequence[str]) -> None:
        self.inner, self.packages = inner, packages

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        sweep(self.packages)


class Finder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules under ``packages`` as Python would, loading each through ``_Registering``."""

    def __init__(self, packages: Sequence[str]) -> None:
        self.packages = tuple(packages)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not _under(fullname, self.packages):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and isinstance(spec.loader, Native):
            spec.loader = _Registering(spec.loader, self.packages)
        return spec
