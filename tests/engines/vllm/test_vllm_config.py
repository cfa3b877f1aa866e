"""vLLM's releases as data (kvplan.engines.vllm.config.RULES): one row per release whose
source showed a change, the newest is max(RULES), a release between rows has the earlier row's
rules. The facts asserted are vLLM's, from its source distributions."""

from dataclasses import fields

from kvplan.engines import vllm
from kvplan.engines.vllm.config import RULES, Rules, rules_for


def test_the_newest_row_is_the_default_release():
    assert max(RULES) == vllm.LATEST == vllm.VllmConfig(max_model_len=1).version
    assert vllm.ENGINE.latest_version == max(RULES)


def test_every_row_changes_something():
    # a release with the same rules as the one before needs no row
    releases = sorted(RULES)
    for before, after in zip(releases, releases[1:], strict=False):
        assert RULES[before] != RULES[after], after


def test_a_release_between_rows_has_the_earlier_rows_rules():
    # config/cache.py: gpu_memory_utilization 0.9 up to 0.19, 0.92 from 0.20
    assert rules_for((0, 19, 1)).gpu_memory_utilization == 0.9
    assert rules_for((0, 20)).gpu_memory_utilization == 0.92
    assert rules_for((0, 25, 0)) == RULES[(0, 24, 0)]
    # config/cache.py BlockSize: 256 from 0.11.1 (its Literal), not in 0.11.0
    assert not rules_for((0, 11, 0)).block_size_256 and rules_for((0, 11, 1)).block_size_256
    # a short version is that release's .0: "0.33" is 0.33.0, "0.8" is before 0.8.3
    assert rules_for((0, 33)) == RULES[(0, 33, 0)]
    assert not rules_for((0, 8)).max_num_seqs_by_gpu and rules_for((0, 8, 5)).max_num_seqs_by_gpu
    # older than the first row read: the first row's rules
    assert rules_for((0, 5, 4)) == RULES[min(RULES)]
    assert not rules_for((0, 5, 4)).v1 and rules_for((0, 8, 0)).v1  # envs.py VLLM_USE_V1


def test_rows_hold_only_switches_named_for_what_they_do():
    # every field is a bool, a count or a named mode; no version tuples inside a row
    for f in fields(Rules):
        assert f.type in ("bool", "int", "float", "str"), f.name
