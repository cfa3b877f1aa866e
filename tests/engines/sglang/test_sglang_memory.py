"""SGLang's releases as data (kvplan.engines.sglang.memory.RULES): one row per release whose
source showed a change, the newest when no release is given. The facts asserted are SGLang's,
from its source distributions."""

from kvplan.engines.sglang import memory as sglang_memory


def test_sglang_rows_by_release():
    # server_args.py: mem_fraction_static by TP alone up to 0.4, from the GPU's memory in 0.5;
    # prefill CUDA graphs (reserve_for_graph_mb) from 0.5.23; no version: the newest
    rules = sglang_memory.rules_for
    assert not rules((0, 4, 7)).mem_fraction_by_memory and rules((0, 5)).mem_fraction_by_memory
    assert not rules((0, 5, 22)).prefill_cuda_graphs and rules((0, 5, 23)).prefill_cuda_graphs
    assert rules(None) == sglang_memory.RULES[max(sglang_memory.RULES)]
    releases = sorted(sglang_memory.RULES)
    for before, after in zip(releases, releases[1:], strict=False):
        assert sglang_memory.RULES[before] != sglang_memory.RULES[after], after
