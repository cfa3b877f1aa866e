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
    assert rules_for((0, 1, 7)) == RULES[min(RULES)]
    assert rules_for((0, 4, 1)) == RULES[(0, 3, 1)]
    assert rules_for((0, 5, 2)) == RULES[(0, 4, 2)]
    assert rules_for((0, 5, 4)) == RULES[(0, 5, 3)]
    # V0's long-context chunked prefill (arg_utils.py use_long_context): in the 0.5.3 wheel,
    # not in 0.5.2's
    assert not rules_for((0, 5, 2)).v0_long_context_chunked
    assert rules_for((0, 5, 3)).v0_long_context_chunked
    assert not rules_for((0, 5, 4)).v1 and rules_for((0, 8, 0)).v1  # envs.py VLLM_USE_V1


def test_rows_hold_only_switches_named_for_what_they_do():
    # every field is a bool, a count or a named mode; no version tuples inside a row
    for f in fields(Rules):
        assert f.type in ("bool", "int", "float", "str"), f.name


def test_02x_before_025_subtracts_the_torch_peak_alone():
    """worker.py profile_num_available_blocks: the 0.2.3 and 0.2.4 wheels subtract
    `torch.cuda.max_memory_allocated()` after profile_run from `total x utilization`, so
    nothing outside torch's allocations counts; the 0.2.5 wheel (and 0.2.7, 0.3.0) subtracts
    `total - free` from torch.cuda.mem_get_info(), the CUDA context and NCCL included."""
    from kvplan.engines.vllm.memory import non_torch_bytes

    mib = 2**20
    assert not rules_for((0, 2, 4)).non_torch_counted
    assert rules_for((0, 2, 5)).non_torch_counted and rules_for((0, 3, 0)).non_torch_counted
    assert non_torch_bytes((0, 2, 4), tp=2) == 0
    # what 0.2.5 counts at TP 2 and 0.2.4 does not: the CUDA context (296 MiB), the kernels
    # (64), the TP group's communicator (64) and torch's communicator made by the driver's
    # logits gather (64): the 488 MiB a GPU that vllm-i2136-codellama-13b-2x4090-v024
    # (tests/fixtures/launch/index.yaml) gains back
    assert non_torch_bytes((0, 2, 5), tp=2) == (296 + 64 + 64 + 64) * mib
    # the custom all-reduce's 8 MiB IPC buffer from 0.3.0 (worker.py init_model:
    # init_custom_ar(); parallel_utils/custom_all_reduce.py is not in the 0.2.5-0.2.7 wheels)
    assert non_torch_bytes((0, 2, 7), tp=2) == (296 + 64 + 64 + 64) * mib
    assert non_torch_bytes((0, 3, 0), tp=2) == (296 + 64 + 64 + 8 + 64) * mib
