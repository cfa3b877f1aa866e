"""kvplan.sources.reader's guarded YAML composer builds what PyYAML's own safe loader builds:
the limits it adds (depth, aliases, expanded size) and its scalar fast path change no value."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sources.reader import parse_yaml

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False), st.text(max_size=12),
    st.sampled_from(["yes", "no", "on", "~", "0x1f", "0o17", "1_000", "2024-01-02", "1e3",
                     ".inf", "-.inf", "'quoted'", "a: b", "- x", "&a", "*a", "!!str 1"]))
_DATA = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(data=_DATA, flow=st.sampled_from([None, True, False]))
def test_guarded_loader_reads_what_safe_load_reads(data, flow):
    text = yaml.safe_dump(data, default_flow_style=flow)
    assert parse_yaml(text, "doc") == yaml.safe_load(text)


@pytest.mark.parametrize("text", [
    "a: &x [1, 2]\nb: *x\n",
    "base: &b {k: 1, v: 2}\nmerged:\n  <<: *b\n  v: 3\n",
    "- !!str 12\n- !!int '7'\n- !!float 1\n- ! 5\n",
    "plain: 0x10\noctal: 0o10\nstamp: 2001-12-14\nnull: ~\n",
    "--- |\n  a literal\n  block\n",
])
def test_anchors_merges_and_tags_as_safe_load_reads_them(text):
    assert parse_yaml(text, "doc") == yaml.safe_load(text)


@pytest.mark.parametrize("item", ["0", "[]", "*a"])
def test_the_expanded_size_limit_is_one_count_of_every_value(item):
    # the root list counts one value and each item one more (a scalar, an empty list, or an
    # alias to the one-value scalar `&a 0`): a document of MAX_NODES values in all reads, one
    # more is refused, whichever kind of value passes the limit
    from kvplan.core.errors import KvplanError
    from kvplan.sources.reader import MAX_ALIASES, MAX_NODES

    def document(values: int) -> str:
        if item != "*a":
            return "[" + ", ".join([item] * (values - 1)) + "]"
        # plain scalars, then the anchored one (1) and the aliases to it last (1 each, as many
        # as the limit on aliases allows), so that an alias passes the limit
        aliases = min(MAX_ALIASES, values - 2)
        return "[" + ", ".join(["0"] * (values - 2 - aliases) + ["&a 0"] + ["*a"] * aliases) \
            + "]"

    assert len(parse_yaml(document(MAX_NODES), "x.yaml")) == MAX_NODES - 1
    with pytest.raises(KvplanError, match=f"expands to more than {MAX_NODES:,} values"):
        parse_yaml(document(MAX_NODES + 1), "x.yaml")
