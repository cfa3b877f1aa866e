"""The budget record every engine fills (kvplan.engines.shared.budget): a measured budget as the
engine's log printed it."""

from __future__ import annotations

import pytest
from engine_cases import GIB

from kvplan.core.errors import BadInputError
from kvplan.core.units import parse_bytes
from kvplan.engines.shared import budget as shared_budget


def test_measured_budget():
    m = shared_budget.measured_budget(parse_bytes("57.65GiB"), pp=2)
    assert m.available_kv_cache_bytes == (5765 * GIB // 100,) * 2 == (61901216153,) * 2
    assert m.method == "measured"
    with pytest.raises(BadInputError):
        shared_budget.measured_budget(0)
