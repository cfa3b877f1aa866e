"""`@record` (kvplan.core.record) behaves as `@dataclass(frozen=True)` does, and defining one
compiles nothing."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import ClassVar  # at module level: where dataclasses looks for it

import pytest

from kvplan.core import record as record_module
from kvplan.core.record import record


def _pair(**options):
    """The same class twice: as a frozen dataclass and as a record."""
    made = []
    for deco in (dataclass(frozen=True), record):
        @deco
        class Item:
            name: str
            size_bytes: int
            tags: tuple[str, ...] = ()
            note: str = field(default="", compare=False, repr=False)
            sources: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
            kind: str = field(default="item", init=False)

        made.append(Item)
    return made


def test_same_fields_init_eq_hash_repr_as_a_frozen_dataclass():
    dc, rec = _pair()
    for args, kwargs in [(("a", 1), {}), (("a", 1, ("x",)), {"note": "n"}),
                         ((), {"name": "b", "size_bytes": 2, "sources": {"k": "v"}})]:
        d, r = dc(*args, **kwargs), rec(*args, **kwargs)
        assert dataclasses.asdict(d) == dataclasses.asdict(r)
        assert repr(d).split("(", 1)[1] == repr(r).split("(", 1)[1]
        assert [f.name for f in dataclasses.fields(d)] == [f.name for f in dataclasses.fields(r)]
        assert r.kind == "item" and dataclasses.is_dataclass(r)
    # note and sources are left out of == and hash (compare=False), as dataclasses does
    assert rec("a", 1, note="x") == rec("a", 1, note="y", sources={"k": "v"})
    assert hash(rec("a", 1, note="x")) == hash(rec("a", 1, sources={"k": "v"}))
    assert rec("a", 1) != rec("a", 2) and rec("a", 1) != dc("a", 1)
    assert len({rec("a", 1), rec("a", 1), rec("b", 1)}) == 2
    assert dataclasses.replace(rec("a", 1, ("t",)), size_bytes=5) == rec("a", 5, ("t",))
    with pytest.raises(TypeError):
        rec("a")  # a field without a default is required, as in a dataclass
    with pytest.raises(TypeError):
        rec("a", 1, kind="other")  # init=False fields are not parameters


@record
class _Stored:
    name: str
    size_bytes: int
    sources: dict[str, str] = field(default_factory=dict, compare=False)


def test_frozen_copied_and_pickled():
    item = _Stored("a", 1, {"k": "v"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.size_bytes = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del item.name
    for twin in (copy.deepcopy(item), pickle.loads(pickle.dumps(item))):
        assert twin == item and twin.sources == {"k": "v"}


def test_subclasses_post_init_and_own_methods():
    @record
    class Base:
        a: int
        b: int = 2

        def __post_init__(self) -> None:
            object.__setattr__(self, "b", self.b * 10)

    @record
    class Child(Base):
        c: str = "c"

    @record
    class Shown:
        x: int

        def __repr__(self) -> str:
            return "mine"

    @record
    class OwnEq:
        x: int
        y: int = 0

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnEq) and self.x == other.x

    @dataclass(frozen=True)
    class OwnEqDataclass:
        x: int
        y: int = 0

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnEqDataclass) and self.x == other.x

    # its own == kept; hashed by the fields as a frozen dataclass is (Python would set None)
    # (hash() raises where __hash__ is None; a frozen dataclass hashes the tuple of its fields)
    assert OwnEq(1, 2) == OwnEq(1, 3)
    assert hash(OwnEq(1, 2)) == hash(OwnEqDataclass(1, 2)) == hash((1, 2))
    assert hash(OwnEq(1, 2)) != hash(OwnEq(1, 3))  # y is hashed though == ignores it
    assert Child(1) == Child(1, 2, "c") and Child(1).b == 20 and Child(1, c="d").c == "d"
    assert Base(1) != Child(1)  # another class: never equal, as with dataclasses
    assert repr(Shown(1)) == "mine"
    with pytest.raises(TypeError, match="frozen dataclass"):
        @record
        class Bad(_FrozenBase):
            y: int = 0

    with pytest.raises(TypeError, match="InitVar"):
        @record
        class Seeded:
            x: int
            seed: dataclasses.InitVar[int] = 0
    with pytest.raises(TypeError, match="keyword-only"):
        @record
        class Named:
            x: int = field(kw_only=True)


@dataclass(frozen=True)
class _FrozenBase:
    x: int = 0


def test_defining_compiles_nothing_and_only_a_type_made_often_compiles_its_init(monkeypatch):
    created = []
    original = dataclasses._create_fn  # type: ignore[attr-defined]
    monkeypatch.setattr(dataclasses, "_create_fn",
                        lambda *a, **k: created.append(a[0]) or original(*a, **k))
    compiled = []
    compile_init = record_module._compile_init
    monkeypatch.setattr(record_module, "_compile_init",
                        lambda cls: compiled.append(cls) or compile_init(cls))

    @record
    class Point:
        x: int
        y: int = 0

    assert created == [] and compiled == []
    made = [Point(i) for i in range(record_module.COMPILE_AFTER - 1)]
    assert compiled == []  # a type made a few times never compiles anything
    assert made[3] == Point(3, 0)  # the last shared call compiles __init__
    assert compiled == [Point] and created == []
    assert Point(2, y=3).y == 3 and compiled == [Point]  # compiled once, then used


def _calls():
    """Calls of _pair()'s Item: (args, kwargs), good and bad."""
    return [(("a", 1), {}), (("a", 1, ("t",)), {"note": "n"}),
            ((), {"name": "b", "size_bytes": 2, "sources": {"k": "v"}}),
            (("a",), {}), ((), {}), (("a", 1, (), "n", {}, "x"), {}),
            (("a", 1), {"name": "b"}), (("a", 1), {"colour": "red"}), (("a", 1), {"kind": "k"})]


def _outcome(cls, args, kwargs):
    try:
        item = cls(*args, **kwargs)
    except TypeError:
        return TypeError
    return (dataclasses.asdict(item), item.note, item.kind, vars(item))


def test_the_shared_init_binds_arguments_as_the_compiled_one_does():
    _, rec = _pair()
    shared = [_outcome(rec, args, kwargs) for args, kwargs in _calls()]
    for _ in range(record_module.COMPILE_AFTER):
        rec("warm", 0)
    assert "args" not in rec.__init__.__code__.co_varnames  # the compiled one now
    compiled = [_outcome(rec, args, kwargs) for args, kwargs in _calls()]
    assert shared == compiled
    assert shared.count(TypeError) == 6  # missing x2, too many, twice given, unknown, init=False


def test_field_table_and_class_attributes_as_dataclasses_makes_them():
    """A record collects its fields itself (not through dataclasses' class processing): the
    same Field entries (ClassVar ones too, inherited ones first), the same class attributes
    left for defaults, __match_args__, and a mutable default refused as dataclasses does."""
    made = []
    for deco in (dataclass(frozen=True), record):
        @deco
        class Base:
            a: int
            b: tuple[int, ...] = (1,)
            kind: ClassVar[str] = "base"

        @deco
        class Child(Base):
            c: str = field(default="c", repr=False)
            d: int = field(default_factory=int)
            b: tuple[int, ...] = (2,)

        made.append(Child)
    dc, rec = made

    def table(cls):
        return [(f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash,
                 f.compare, f.kw_only, f._field_type)
                for f in cls.__dataclass_fields__.values()]

    assert table(rec) == table(dc)
    assert [f.name for f in dataclasses.fields(rec)] == ["a", "b", "c", "d"]
    assert rec.__match_args__ == dc.__match_args__ == ("a", "b", "c", "d")
    assert rec.c == "c" and rec.b == (2,) and rec.kind == "base"
    assert "d" not in vars(rec) and "d" not in vars(dc)  # a factory leaves no class attribute
    assert dataclasses.replace(rec(1), c="x") == rec(1, (2,), "x", 0)
    for deco in (dataclass(frozen=True), record):
        with pytest.raises(ValueError, match="mutable default"):
            @deco
            class Listed:
                items: list[int] = []  # noqa: RUF012
