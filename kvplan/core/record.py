"""`@record`: a frozen dataclass that costs a tenth as much to define.

`@dataclass(frozen=True)` compiles six methods from generated source when the class statement
runs (about 0.45 ms a class on a 2-core build machine; `kvplan plan` defines some sixty before
it answers). A `@record` class is the same kind of value (`dataclasses.fields`, `asdict`,
`replace` and `field(...)` work; immutable, equal and hashed by its fields), but `__init__` is
compiled only after COMPILE_AFTER instances and the other methods are shared functions. Its
`__dataclass_params__` say `frozen=False` (immutability is enforced here), so derive records
from records only. The reasoning in full: docs/architecture.md, "Notes on single modules".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import Any, ClassVar, TypeVar, dataclass_transform

_T = TypeVar("_T", bound=type)

@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: _T) -> _T:
    """Make `cls` a frozen dataclass whose methods are cheap to create (module docstring)."""
    for base in cls.__mro__[1:]:
        params = base.__dict__.get("__dataclass_params__")
        if params is not None and params.frozen:
            raise TypeError(f"record {cls.__qualname__} cannot derive from the frozen "
                            f"dataclass {base.__qualname__}: make the base a @record")
    fields = _collect_fields(cls)
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

    own = cls.__dict__
    # a class body that defines __eq__ gets __hash__ = None from Python; dataclasses still
    # adds the field hash to a frozen class then, and so does this
    implicit_no_hash = own.get("__hash__", 0) is None and "__eq__" in own
    for name, method in (("__init__", _first_init), ("__repr__", __repr__), ("__eq__", __eq__),
                         ("__hash__", __hash__), ("__setattr__", _setattr),
                         ("__delattr__", _delattr)):
        if name not in own or (name == "__hash__" and implicit_no_hash):
            setattr(cls, name, method)
    return cls


# What `dataclasses.dataclass(cls, init=False, repr=False, eq=False)` records on a class,
# made once: every record shares it.
# (A docstring, or dataclasses would compute one from object's signature: ~1 ms.)
_PARAMS = dataclasses.dataclass(init=False, repr=False, eq=False)(
    type("_Params", (), {"__doc__": "-"})).__dataclass_params__  # type: ignore[attr-defined]


def _collect_fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """What `dataclasses.dataclass(cls, init=False, repr=False, eq=False)` does to `cls`,
    without its general machinery (a tenth of a record's cost went to it): the fields of the
    dataclass bases, then the class's own annotations in order, each default or `field(...)`
    made a `dataclasses.Field` (`__dataclass_fields__`, ClassVar entries included), the
    class attributes set to the defaults, `__dataclass_params__` and `__match_args__`.
    InitVar and keyword-only fields are refused."""
    declared: dict[str, dataclasses.Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:
        inherited = base.__dict__.get("__dataclass_fields__")
        if inherited is not None:
            declared.update(inherited)
    own = cls.__dict__
    for name, kind in own.get("__annotations__", {}).items():
        text = kind if isinstance(kind, str) else ""
        if (text.startswith(("InitVar", "dataclasses.InitVar", "KW_ONLY", "dataclasses.KW_ONLY"))
                or kind is dataclasses.InitVar or isinstance(kind, dataclasses.InitVar)
                or kind is dataclasses.KW_ONLY):
            raise TypeError(f"record {cls.__qualname__}: keyword-only fields and InitVar "
                            "pseudo-fields are not supported (use @dataclass(frozen=True))")
        default = own.get(name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            f = default
            if f.kw_only is True:
                raise TypeError(f"record {cls.__qualname__}: keyword-only fields and InitVar "
                                "pseudo-fields are not supported (use @dataclass(frozen=True))")
        else:
            f = dataclasses.field(default=default)
        f.name = name
        f.type = kind
        classvar = (text.startswith(("ClassVar", "typing.ClassVar")) if text
                    else kind is ClassVar or getattr(kind, "__origin__", None) is ClassVar)
        if classvar:
            f._field_type = dataclasses._FIELD_CLASSVAR  # type: ignore[attr-defined]
            if f.default_factory is not dataclasses.MISSING:
                raise TypeError(f"field {name} cannot have a default factory")
        else:
            f._field_type = dataclasses._FIELD  # type: ignore[attr-defined]
            if f.kw_only is dataclasses.MISSING:
                f.kw_only = False
            if f.default.__class__.__hash__ is None:  # list, dict, set: as dataclasses says
                raise ValueError(f"mutable default {type(f.default)} for field {name} is "
                                 "not allowed: use default_factory")
        if isinstance(default, dataclasses.Field):
            if f.default is dataclasses.MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        declared[name] = f
    cls.__dataclass_params__ = _PARAMS  # type: ignore[attr-defined]
    cls.__dataclass_fields__ = declared  # type: ignore[attr-defined]
    fields = tuple(f for f in declared.values()
                   if f._field_type is dataclasses._FIELD)  # type: ignore[attr-defined]
    if "__match_args__" not in own:
        setattr(cls, "__match_args__", tuple(f.name for f in fields if f.init))  # noqa: B010
    return fields


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


# Instances a record makes through the shared __init__ before its own is compiled: a type
# used a few dozen times in a run (most of them, at start-up) never compiles anything; a type
# made thousands of times (sweeps, searches) gets dataclasses' speed from its 33rd instance.
# Compiling costs about as much as 30-50 shared calls (0.1 ms for a small record, 0.6 ms for
# vLLM's 37-field Rules, made 21 times as its release table is built); at 8, start-up
# compiled types it then made a few more times (~8 M instructions of every vLLM plan).
COMPILE_AFTER = 32


def _first_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """Give the class a shared __init__ (it compiles the real one after COMPILE_AFTER
    instances) in place of this one, and run it."""
    owner = next(c for c in type(self).__mro__ if c.__dict__.get("__init__") is _first_init)
    owner.__init__ = _shared_init(owner)  # type: ignore[misc]
    owner.__init__(self, *args, **kwargs)  # type: ignore[misc]


def _shared_init(cls: type) -> Callable[..., None]:
    """An __init__ that binds arguments to fields the way the compiled one does (the same
    parameters, defaults, factories, init=False fields and __post_init__), nothing compiled."""
    fields = dataclasses.fields(cls)
    params = tuple(f.name for f in fields if f.init)
    known = frozenset(params)
    required = tuple(f.name for f in fields if f.init and f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)
    # (name, default, factory) per field in order; init=False fields are never given
    steps = tuple((f.name, f.default, f.default_factory) for f in fields)
    post_init = hasattr(cls, "__post_init__")
    name = f"{cls.__qualname__}.__init__()"
    missing_value = dataclasses.MISSING
    set_value = object.__setattr__
    left = COMPILE_AFTER

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal left
        left -= 1
        if left == 0:
            cls.__init__ = _compile_init(cls)  # type: ignore[misc]
        if len(args) > len(params):
            raise TypeError(f"{name} takes {len(params) + 1} positional arguments but "
                            f"{len(args) + 1} were given")
        given = dict(zip(params, args, strict=False))
        for key, value in kwargs.items():
            if key not in known:
                raise TypeError(f"{name} got an unexpected keyword argument {key!r}")
            if key in given:
                raise TypeError(f"{name} got multiple values for argument {key!r}")
            given[key] = value
        missing = [m for m in required if m not in given]
        if missing:
            raise TypeError(f"{name} missing {len(missing)} required argument"
                            f"{'s' if len(missing) > 1 else ''}: "
                            + ", ".join(repr(m) for m in missing))
        for field_name, default, factory in steps:
            if field_name in given:
                value = given[field_name]
            elif default is not missing_value:
                value = default
            elif factory is not missing_value:
                value = factory()
            else:
                continue  # an init=False field without a default: left unset, as dataclasses
            set_value(self, field_name, value)
        if post_init:
            self.__post_init__()

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


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


def plain(value: Any) -> Any:
    """A result as JSON holds it (json.dumps takes what this returns): a record or dataclass
    becomes a dict of its public fields, a Fraction an exact 'a/b' string (unlike a float), a tuple,
    list or set a list, a dict's keys that JSON cannot hold (tuples) strings, an object with a
    string `name` and no fields (an engine) that name; dicts and lists are walked. Anything
    else is returned as it is, for json.dumps to refuse."""
    from fractions import Fraction

    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, dict):
        return {k if k is None or isinstance(k, (str, int, float)) else str(k): plain(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [plain(v) for v in items]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.name.startswith("_") and hasattr(value, f.name)}  # _: a cache
    if hasattr(value, "__fspath__"):  # a path: all of it, not its `name`
        return str(value)
    name = getattr(value, "name", None)
    if isinstance(name, str) and not isinstance(value, type):
        return name
    return value
