"""The Python front door (kvplan.model / kvplan.deploy), each call checked against a hand
formula, and its laziness: `import kvplan` and `kvplan --help` load none of it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from probes import probe

import kvplan
from kvplan.core.dtypes import parse_format
from kvplan.core.sizing import SizeResult
from kvplan.planning.plan import ConcurrencyResult, ContextResult, LayoutResult, WorkloadResult

# Llama-3.1-8B (config.json): 32 layers, 8 KV heads of 128
LAYERS, KV_HEADS, HEAD_DIM = 32, 8, 128


def test_model_size_in_fp8():
    m = kvplan.model("llama-3.1-8b")
    r = m.size(tokens="8k", kv_dtype="fp8")
    assert isinstance(r, SizeResult)
    per_token = 2 * LAYERS * KV_HEADS * HEAD_DIM * 1  # K and V, one byte each in fp8
    assert r.per_token_bytes == per_token
    assert r.request_bytes == r.batch_bytes == per_token * 8192


def test_kv_dtype_as_a_format_object_or_a_name_is_the_same():
    m = kvplan.model("llama-3.1-8b")
    assert m.size(tokens=8192, batch=4, kv_dtype=parse_format("int4:g64")) == \
        m.size(tokens="8k", batch=4, kv_dtype="int4:g64")
    by_lengths = m.size(lengths="2k,4k")
    assert by_lengths.batch_bytes == 2 * LAYERS * KV_HEADS * HEAD_DIM * 2 * (2048 + 4096)
    assert m.size(lengths=["2k", 4096]) == by_lengths


def test_a_request_past_the_maximum_context_is_noted():
    notes: list[str] = []
    kvplan.model("llama-3.1-8b").size(tokens="256k", warnings=notes)
    assert notes == ["262,144 tokens is more than llama-3.1-8b's maximum context of 131,072"]


# A measured KV budget makes vLLM's arithmetic hand-checkable: 8 GiB per GPU, TP 4 -> 2 KV
# heads per GPU; a block of 16 tokens holds K and V of 2 x 128 in bf16 on each of 32 layers.
BUDGET = 8 * 2**30
BLOCK_BYTES = LAYERS * 2 * (KV_HEADS // 4) * HEAD_DIM * 2 * 16
NUM_BLOCKS = BUDGET // BLOCK_BYTES
USABLE = NUM_BLOCKS - 1  # vLLM's BlockPool keeps block 0 as the null block


@pytest.fixture(scope="module")
def deployed():
    return kvplan.deploy(kvplan.model("llama-3.1-8b"), kv_memory="8GiB", count=4)


def test_deploy_reads_the_settings(deployed):
    dep = deployed.deployment
    assert (dep.tp, dep.pp, dep.engine, dep.kv_memory_bytes) == (4, 1, "vllm", BUDGET)
    assert deployed.capacity.engine_numbers["num_blocks"] == NUM_BLOCKS


def test_max_concurrency(deployed):
    c = deployed.max_concurrency("32k")
    assert isinstance(c, ConcurrencyResult)
    assert c.max_requests == USABLE // (32768 // 16)


def test_max_context(deployed):
    r = deployed.max_context(64)
    assert isinstance(r, ContextResult)
    assert r.max_context_tokens == USABLE // 64 * 16  # whole blocks per request


def test_fits(deployed):
    small = deployed.fits("64x(2k+512)")
    assert isinstance(small, WorkloadResult)
    assert 64 * ((2048 + 512) // 16) <= USABLE and small.fits
    # 8 requests of 33,792 tokens need 8 x 2,112 blocks, more than the pool
    assert 8 * ((32768 + 1024) // 16) > USABLE and not deployed.fits("8x(32k+1k)").fits


def test_fewest_gpus_on_a_catalog_gpu():
    d = kvplan.deploy("llama-3.1-8b", gpu="h100", kv_dtype="fp8")
    layout = d.fewest_gpus(context="32k", concurrency=64)
    assert isinstance(layout, LayoutResult) and layout.best is not None
    best = kvplan.deploy("llama-3.1-8b", gpu="h100", kv_dtype="fp8", tp=layout.best.tp,
                         pp=layout.best.pp)
    assert best.max_concurrency("32k").max_requests >= 64
    if layout.best.num_gpus > 1:  # one GPU fewer does not meet it
        fewer = kvplan.deploy("llama-3.1-8b", gpu="h100", kv_dtype="fp8",
                              count=layout.best.num_gpus // 2)
        assert fewer.max_concurrency("32k").max_requests < 64


def test_gpu_count_and_engine_by_name():
    d = kvplan.deploy("llama-3.1-8b", gpu="h100", count=4)
    # the concurrency is the engine's usable blocks over the blocks one 32k request needs
    num_blocks = d.capacity.engine_numbers["num_blocks"]
    assert d.max_concurrency("32k").max_requests == (num_blocks - 1) // (32768 // 16)
    assert d.deployment.gpu_memory_bytes == 85_028_896_768  # H100 SXM, deviceQuery


def test_every_public_name_has_a_docstring():
    import kvplan.api as api

    for name in kvplan.__all__:
        if name != "__version__":
            obj = getattr(kvplan, name)
            assert obj is getattr(api, name) and obj.__doc__, name
    for method in ("size",):
        assert getattr(api.Model, method).__doc__
    for method in ("max_concurrency", "max_context", "fits", "fewest_gpus", "capacity"):
        assert getattr(api.Deployed, method).__doc__, method


def test_import_kvplan_loads_nothing_else():
    code = ("import sys, kvplan; print(sorted(m for m in sys.modules if m.startswith('kvplan')"
            "))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['kvplan']"


def test_help_does_not_load_the_front_door():
    result = probe(["--help"], ("kvplan.api", "kvplan.planning.plan", "kvplan.sources.library"))
    assert result.ran and result.loaded == []
