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
