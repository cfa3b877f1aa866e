"""`@record`: a frozen dataclass that costs a tenth as much to define.

`@dataclass(frozen=True)` compiles six methods (`__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__`, `__delattr__`) from generated source when the class statement runs: about
0.45 ms a class on a 2-core build machine, and `kvplan plan` defines some sixty of them
before it answers (a quarter of its start-up). A `@record` class is the same kind of value:
a dataclass (`dataclasses.fields`, `asdict` and `replace` work, fields take the same
`field(...)` options), immutable (assigning or deleting an attribute raises
`dataclasses.FrozenInstanceError`), equal and hashed by its fields, shown as
`Name(a=1, b=2)`. What differs is when the work is done:

- `__init__` is compiled when the first instance is made, from the same kind of source
  dataclasses writes, so making instances is as fast as with a dataclass; a class never
  instantiated in a run never pays for it;
- `__eq__`, `__hash__`, `__repr__`, `__setattr__` and `__delattr__` are shared functions
  that read the fields' names from the class (nothing compiled).

The class's own `__dataclass_params__` say `frozen=False` (immutability is enforced here, not
by dataclasses), so a `@dataclass(frozen=True)` class cannot derive from a record, nor a
record from a frozen dataclass: derive records from records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T", bound=type)

@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: _T) -> _T:
    """Make `cls` a frozen dataclass whose methods are cheap to create (module docstring)."""
    for base in cls.__mro__[1:]:
        params = base.__dict__.get("__dataclass_params__")
        if params is not None and params.frozen:
            raise TypeError(f"record {cls.__qualname__} cannot derive from the frozen "
                            f"dataclass {base.__qualname__}: make the base a @record")
    own_doc = cls.__dict__.get("__doc__")
    if own_doc is None:
        cls.__doc__ = "-"  # dataclasses would build a docstring with inspect.signature
    dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    if own_doc is None:
        cls.__doc__ = None
    fields = dataclasses.fields(cls)
    if any(f.kw_only is True for f in fields):
        raise TypeError(f"record {cls.__qualname__}: keyword-only fields are not supported")
    compared = _getter(f.name for f in fields if f.compare)
    hashed = _getter(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    shown = tuple(f.name for f in fields if f.repr)
    shown_values = _getter(shown)

    def __eq__(self: object, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return compared(self) == compared(other)

    def __hash__(self: object) -> int:
        return hash(hashed(self))

    def __repr__(self: object) -> str:
        pairs = zip(shown, shown_values(self), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{k}={v!r}' for k, v in pairs)})"

    for name, method in (("__init__", _first_init), ("__repr__", __repr__), ("__eq__", __eq__),
                         ("__hash__", __hash__), ("__setattr__", _setattr),
                         ("__delattr__", _delattr)):
        if name not in cls.__dict__:
            setattr(cls, name, method)
    return cls


def _getter(names: Any) -> Callable[[object], tuple[Any, ...]]:
    """A function returning the named attributes as a tuple (attrgetter returns a bare value
    for one name and fails for none)."""
    names = tuple(names)
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return attrgetter(*names)


def _first_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """Compile the class's real __init__ (dataclasses' own source for a frozen class), put it
    in place of this one, and run it."""
    owner = next(c for c in type(self).__mro__ if c.__dict__.get("__init__") is _first_init)
    owner.__init__ = _compile_init(owner)  # type: ignore[misc]
    owner.__init__(self, *args, **kwargs)  # type: ignore[misc]


def _compile_init(cls: type) -> Callable[..., None]:
    params: list[str] = []
    body: list[str] = []
    names: dict[str, Any] = {"__set": object.__setattr__, "__missing": dataclasses.MISSING}
    for f in dataclasses.fields(cls):
        value = f.name
        if f.default is not dataclasses.MISSING:
            names[f"__default_{f.name}"] = f.default
            default = f"__default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            names[f"__factory_{f.name}"] = f.default_factory
            default = "__missing"
            value = f"__factory_{f.name}() if {f.name} is __missing else {f.name}"
        else:
            default = ""
        if not f.init:
            if not default:
                continue  # dataclasses leaves it unset as well
            value = f"__factory_{f.name}()" if default == "__missing" else default
        else:
            params.append(f"{f.name}={default}" if default else f.name)
        body.append(f"  __set(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("  self.__post_init__()")
    source = (f"def __init__(self{''.join(', ' + p for p in params)}):\n"
              + ("\n".join(body) or "  pass") + "\n")
    namespace: dict[str, Any] = {}
    exec(source, names, namespace)  # noqa: S102 - source built above from field names only
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _setattr(self: object, name: str, value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: object, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
