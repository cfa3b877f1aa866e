"""The release lookup every engine's rows go through (kvplan.engines.shared.releases): a
release between rows has the earlier row's rules."""

from kvplan.engines.shared.releases import row_for


def test_the_shared_lookup_takes_the_row_at_or_before():
    rows = {(1, 0, 0): "a", (1, 2, 0): "b", (2, 0, 0): "c"}
    assert [row_for(rows, v) for v in [(0, 9), (1,), (1, 1, 9), (1, 2), (1, 9, 9, 9), (2, 0),
                                       (7,)]] == ["a", "a", "a", "b", "b", "c", "c"]
