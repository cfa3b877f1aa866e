"""`kvplan validate`: real torch allocations agree byte for byte with kvplan's predictions.

The allocation side builds each layout's tensors from their shapes and torch dtypes; the
prediction side is kvplan's maths. The tests below show they agree for every library model
and layout, for every KV dtype on a model of each attention kind, across two Gloo ranks, and
that the check fails when the maths is wrong.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import weakref
from importlib.util import find_spec

import pytest
from typer.testing import CliRunner

import kvplan.cli.validate  # noqa: F401  (registers the command until cli.py imports it)
from kvplan import validate as v
from kvplan.cli import app
from kvplan.core.dtypes import KVFormat, parse_format
from kvplan.core.errors import BadInputError
from kvplan.core.layers import (
    MLA,
    ChunkedLocal,
    CrossAttention,
    FullAttention,
    NoCache,
    RecurrentState,
    SlidingWindow,
    StateTensor,
)
from kvplan.core.spec import ModelSpec
from kvplan.validate import allocate

HAS_TORCH = find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
runner = CliRunner()


def _cuda() -> bool:
    if not HAS_TORCH:
        return False
    import torch

    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not _cuda(), reason="no CUDA device")


def invoke(*args: str):
    return runner.invoke(app, ["validate", *args], env={"COLUMNS": "140"})


# --- small models, one per attention kind: windows and chunks crossed at 50 tokens ---------

def _spec(name: str, layers, heads: int = 4) -> ModelSpec:
    return ModelSpec(name=name, layers=tuple(layers), num_attention_heads=heads,
                     max_context_tokens=4096)


MAMBA = RecurrentState("mamba2", (StateTensor("conv", (3, 96), 2, tp_axis=1),
                                  StateTensor("ssm", (4, 16, 8), 4, tp_axis=0)))
MODELS = {
    "gqa": _spec("gqa", [FullAttention(2, 64)] * 3),
    "mha-v-dim": _spec("mha-v-dim", [FullAttention(4, 48, v_head_dim=32)] * 2),
    "sliding": _spec("sliding", [SlidingWindow(2, 32, window=24), FullAttention(2, 32)] * 3),
    "chunked": _spec("chunked", [ChunkedLocal(2, 32, chunk=32)] * 3 + [FullAttention(2, 32)]),
    "cross": _spec("cross", [FullAttention(2, 32)] * 3 + [CrossAttention(2, 32, 10)]),
    "mla": _spec("mla", [MLA(128, 32)] * 3, heads=8),
    "mla-indexer": _spec("mla-indexer", [MLA(128, 32, 128)] * 2, heads=8),
    "hybrid": _spec("hybrid", [MAMBA, NoCache(), MAMBA, FullAttention(2, 32)] * 2),
}
DTYPES = ("fp32", "fp16", "bf16", "fp8", "fp8_e5m2", "int8", "int4", "int2", "nvfp4",
          "int4:g64", "int2:g32:s=fp32:sym", "fp8:g32:s=fp8", "int3:g16", "int4:g32:r16",
          "int2:g16:kivi", "int2:g16:kivi:r16", "fp8_ds_mla", "nvfp4_ds_mla")
PAGED = ("vllm", "sglang")


def _run(spec: ModelSpec, dtype: str = "auto", layout: str = "vllm", tokens: int = 50,
         batch: int = 2, **kw) -> v.ValidateResult:
    fmt = parse_format(dtype, spec.dtype)
    return v.validate(v.ValidateRequest(spec, fmt, tokens, batch, layout=layout, device="cpu",
                                        **kw))


def _expected_refusal(spec: ModelSpec, fmt: KVFormat, layout: str) -> bool:
    mla_only = fmt.name in ("fp8_ds_mla", "nvfp4_ds_mla")
    # transformers' QuantizedCache (a residual format) takes only full-attention models
    # (QuantizedCache.__init__, transformers 5.24 cache_utils.py)
    not_full = any(getattr(layer, "window_tokens", None)
                   or isinstance(layer, (RecurrentState, CrossAttention))
                   for layer in spec.layers)
    return (mla_only and not spec.is_mla) or (
        layout in PAGED and (fmt.residual is not None or fmt.per_channel_keys)) or (
        layout.startswith("hf-") and fmt.residual is not None and not_full)


@needs_torch
@pytest.mark.parametrize("model", MODELS)
def test_every_kv_dtype_and_layout_on_each_attention_kind(model):
    spec = MODELS[model]
    checked = 0
    for dtype in DTYPES:
        fmt = parse_format(dtype, spec.dtype)
        for layout in v.layouts():
            if _expected_refusal(spec, fmt, layout):
                with pytest.raises(BadInputError):
                    _run(spec, dtype, layout)
                continue
            result = _run(spec, dtype, layout, max_len=64)
            assert result.ok, (dtype, layout, result.ranks[0].kinds)
            assert result.measured_bytes == result.predicted_bytes > 0
            checked += 1
    assert checked >= 40


@needs_torch
@pytest.mark.parametrize("tokens", [1, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40, 64, 100])
def test_window_edges_in_every_layout(tokens):
    for model in ("sliding", "chunked", "cross", "hybrid"):
        for layout in v.layouts():
            result = _run(MODELS[model], "bf16", layout, tokens=tokens, batch=1)
            assert result.ok and result.measured_bytes == result.predicted_bytes > 0, (
                model, layout)


# --- the library and the CLI ----------------------------------------------------------------

@pytest.mark.slow  # ~30 s on 2 cores: 280 allocations
@needs_torch
def test_all_runs_every_library_model_and_layout_through_the_cli():
    from kvplan.sources.library import load_library

    res = invoke("--all", "-f", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "kvplan.validate-all/1" and doc["ok"] is True
    names = {s.name for s in load_library()}
    assert {(r["model"], r["layout"]) for r in doc["rows"]} == {
        (n, layout) for n in names for layout in v.layouts()}
    for row in doc["rows"]:
        if row["model"] == "deepseek-v4-flash":  # compressed attention: refused by name
            assert row["status"].startswith("skipped: ") and "compressed" in row["status"]
            continue
        assert row["status"] == "ok", row
        assert row["measured_bytes"] == row["predicted_bytes"] > 0 and row["diff_bytes"] == 0
    # the run time is reported, but not bounded here: a wall-clock limit in a unit test fails
    # on a loaded machine (the 120 s bound on 2 cores belongs in benchmarks/)
    assert isinstance(doc["elapsed_ms"], int) and doc["elapsed_ms"] >= 0
    # hand check of Llama-3.1-8B's rows at the probe size (2 requests of 100 tokens, static
    # layouts preallocate 128): 131,072 B per token (K+V x 32 layers x 8 KV heads x 128 x 2 B)
    token = 2 * 32 * 8 * 128 * 2
    llama = {r["layout"]: r["measured_bytes"] for r in doc["rows"] if r["model"] == "llama-3.1-8b"}
    assert llama == {
        "vllm": (2 * -(-100 // 16) + 1) * 16 * token,  # 7 blocks each + the null block
        "sglang": (2 * 100 + 1) * token,  # the pool's tokens + one padding page
        "hf-static": 2 * 128 * token,
        "contiguous": 2 * 128 * token,
        "hf-dynamic": 2 * 100 * token,
    }


@needs_torch
def test_vllm_pool_is_the_blocks_plus_the_null_block():
    res = invoke("llama-3.1-8b", "-t", "100", "-b", "2", "--layout", "vllm", "-f", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    page = 2 * 16 * 8 * 128 * 2  # K+V x block 16 x 8 KV heads x 128 x bf16
    blocks = 2 * -(-100 // 16) + 1  # 7 blocks per request, plus block 0 (the null block)
    assert doc["measured_bytes"] == doc["predicted_bytes"] == blocks * page * 32
    rows = {k["kind"]: k for k in doc["kinds"]}
    assert rows["null block"]["measured_bytes"] == page * 32
    assert rows["padding"]["measured_bytes"] == 0


@needs_torch
def test_vllm_pools_are_raw_int8_pages_viewed_per_layer():
    spec = MODELS["gqa"]
    fmt = parse_format("int4:g64")
    layout = v.cache_layout("vllm", spec, fmt, 50, 2, 1, 16)  # the engine's own layout
    assert layout.paged and not layout.shared_tensors
    assert [tuple(c.name for c in g.layers) for g in layout.groups] == [("0", "1", "2")]
    pools = v.block_pools(layout, fmt, 1)
    assert len(pools) == 3  # one tensor per layer
    pool = pools[0]
    assert pool.num_blocks == 2 * -(-50 // 16) + 1  # 4 blocks per request + the null block
    # per block: K and V, each 16 tokens x 2 heads x (32 packed bytes + fp16 scale + zero)
    assert pool.page_bytes == 2 * 16 * 2 * (64 // 2 + 2 + 2)
    assert sorted(pool.uses[0].planes) == [
        ("k", "uint8", (16, 2, 32)), ("k.scale", "float16", (16, 2, 1)),
        ("k.zero", "float16", (16, 2, 1)), ("v", "uint8", (16, 2, 32)),
        ("v.scale", "float16", (16, 2, 1)), ("v.zero", "float16", (16, 2, 1))]


@needs_torch
def test_vllm_hybrid_aligns_the_block_and_pads_the_state_page():
    # attention 2 x 2 x 32 x 2 = 256 B/token; state 3*96*2 + 4*16*8*4 = 2,624 B
    # -> block 16 * cdiv(2624, 16 * 256) = 16 tokens, page 4,096 B, state padded by 1,472 B
    result = _run(MODELS["hybrid"], "bf16", "vllm", tokens=50, batch=2)
    assert result.ok and result.block_size == 16
    rows = {k.kind: k for k in result.ranks[0].kinds}
    assert rows["padding"].measured_bytes == (4096 - 2624) * 4 * 2  # 4 state layers x 2 requests
    assert rows["state"].measured_bytes == 2624 * 4 * 2
    # groups of 2 slots: 1 attention group (1 layer + 1 padding slot), 2 state groups
    assert rows["null block"].measured_bytes == 2 * 4096


@needs_torch
def test_hf_static_tensors_are_batch_heads_max_len_head_dim():
    spec = MODELS["sliding"]
    def planes_of(dtype: str) -> list:
        fmt = parse_format(dtype)
        return v.dense_planes(v.cache_layout("hf-static", spec, fmt, 50, 3, 1, None, 64), fmt, 1)

    planes = planes_of("bf16")
    assert {p.shape for p in planes if p.kind == "full"} == {(3, 2, 64, 32)}
    assert {p.shape for p in planes if p.kind == "sliding"} == {(3, 2, 24, 32)}  # the window
    packed = planes_of("int4:g16")
    assert {(p.name, p.dtype, p.shape[-1]) for p in packed if p.layer == 1} == {
        ("k", "uint8", 16), ("k.scale", "float16", 2), ("k.zero", "float16", 2),
        ("v", "uint8", 16), ("v.scale", "float16", 2), ("v.zero", "float16", 2)}
    fp8 = planes_of("fp8")
    assert {p.dtype for p in fp8} == {"float8_e4m3fn"}


@needs_torch
def test_fp8_ds_mla_is_a_656_byte_uint8_record():
    spec = _spec("dsv3", [MLA(512, 64)], heads=128)
    fmt = parse_format("fp8_ds_mla")
    planes = v.dense_planes(v.cache_layout("contiguous", spec, fmt, 10, 1, 1, None, 10), fmt, 1)
    assert [(p.dtype, p.shape) for p in planes] == [("uint8", (1, 10, 656))]
    assert _run(spec, "fp8_ds_mla", "vllm", tokens=10, batch=1, block_size=64).ok


@needs_torch
def test_json_report_has_the_byte_fields():
    res = invoke("llama-3.1-8b", "-t", "64", "--layout", "hf-dynamic", "-f", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "kvplan.validate/1"
    for key in ("predicted_bytes", "measured_bytes", "diff_bytes"):
        assert isinstance(doc[key], int)
        assert all(isinstance(k[key], int) for k in doc["kinds"])
    assert doc["predicted_bytes"] == 2 * 8 * 128 * 2 * 32 * 64  # K+V x heads x dim x 2 B
    assert doc["ok"] is True and doc["ranks"][0]["resident_bytes"] is not None


@needs_torch
def test_table_and_markdown_show_the_comparison():
    table = invoke("llama-3.1-8b", "-t", "64", "--layout", "contiguous")
    assert table.exit_code == 0 and "OK: measured == predicted" in table.stdout
    md = invoke("llama-3.1-8b", "-t", "64", "--layout", "sglang", "-f", "markdown")
    assert "| full | 32 | 8,519,680 | 8,519,680 | 0 |" in md.stdout  # (64 + 1 page) x 4 KiB x 32


# --- the check can fail ---------------------------------------------------------------------

@needs_torch
def test_a_wrong_formula_gives_exit_1(monkeypatch):
    real = FullAttention.bytes_for_tokens
    monkeypatch.setattr(FullAttention, "bytes_for_tokens",
                        lambda self, tokens, fmt, tp=1: real(self, tokens, fmt, tp) + 1)
    res = invoke("llama-3.1-8b", "-t", "64", "--layout", "hf-static", "-f", "json")
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["diff_bytes"] == -32  # one byte per layer and request


@needs_torch
def test_a_wrong_packing_rule_is_caught(monkeypatch):
    # kvplan's row formula rounds packed rows up to whole bytes; pretend it forgot to
    real = KVFormat.row_bytes
    monkeypatch.setattr(KVFormat, "row_bytes", lambda self, n: real(self, n) - (
        1 if self.bits < 8 else 0))
    result = _run(MODELS["gqa"], "int4:g64", "hf-static")
    # real rows: 64 values x 4 bits = 32 B + one group's fp16 scale and zero = 36 B; one byte
    # short on each of 3 layers x K,V x 2 heads x 2 requests x 50 slots
    rows = 3 * 2 * 2 * 2 * 50
    assert result.measured_bytes == rows * (64 // 2 + 2 + 2)
    assert not result.ok and result.diff_bytes == rows * 1


@needs_torch
def test_a_wrong_layout_rule_is_caught(monkeypatch):
    # HF StaticSlidingWindowLayer preallocates min(window, max_cache_len) slots: 24 of 64.
    # K+V x 2 heads x 32 x bf16 per slot, 3 sliding layers x 2 requests
    slot = 2 * 2 * 32 * 2
    result = _run(MODELS["sliding"], "bf16", "hf-static", max_len=64)
    sliding = {k.kind: k for k in result.ranks[0].kinds}["sliding"]
    assert result.ok and sliding.measured_bytes == 3 * 2 * 24 * slot
    # the allocation really follows the engine's rule (validate keeps no copy of it): with
    # the window uncapped in kvplan.engines.hf (the rule its layout asks), the tensors grow
    # and the hand formula fails
    from kvplan.engines.hf import layout

    real = layout.held_tokens
    monkeypatch.setattr(layout, "held_tokens", lambda layer, cache, seq_len: seq_len
                        if isinstance(layer, SlidingWindow) else real(layer, cache, seq_len))
    v.cache_layout.cache_clear()
    try:
        wrong = _run(MODELS["sliding"], "bf16", "hf-static", max_len=64)
    finally:
        v.cache_layout.cache_clear()
    sliding = {k.kind: k for k in wrong.ranks[0].kinds}["sliding"]
    assert sliding.measured_bytes - 3 * 2 * 24 * slot == 3 * 2 * (64 - 24) * slot


@needs_torch
def test_a_layout_that_disagrees_with_the_byte_formulas_is_caught(monkeypatch):
    # an engine whose described rows are not what the formulas predict for its layers (here
    # SGLang's padding page forgotten in the tensors) shows up as a difference
    from kvplan.validate import allocate as alloc

    real = alloc.dense_planes

    def short(layout, fmt, tp):
        rows = tuple(dataclasses.replace(c, slots=c.slots - 1) for c in layout.layers)
        return real(dataclasses.replace(layout, layers=rows), fmt, tp)

    monkeypatch.setattr(alloc, "dense_planes", short)
    result = _run(MODELS["gqa"], "bf16", "sglang", tokens=50, batch=2)
    # one token row fewer on each of 3 layers: K+V x 2 heads x 64 x bf16
    assert not result.ok and result.diff_bytes == -3 * 2 * 2 * 64 * 2


def test_validate_predicts_what_the_planner_plans_for_hf():
    # the hf engine's profile (what `plan --engine hf` sizes) and validate's prediction over
    # the engine's layout agree on every model kind, for both cache classes
    from kvplan.engines import hf

    for name, spec in MODELS.items():
        fmt = parse_format("bf16")
        for cache, seq_len in (("static", 64), ("dynamic", 50)):
            request = v.ValidateRequest(spec, fmt, 50, 2, layout=f"hf-{cache}", max_len=64)
            planned = hf.profile(spec, cache=cache, seq_len=seq_len, batch=2, kv_dtype="bf16")
            assert sum(v.predict(request).values()) == planned.cache_bytes, (name, cache)


@needs_torch
def test_sliding_just_past_the_window():
    # vLLM holds cdiv(min(tokens, window + block - 1), block) blocks: 2 blocks of 16 for a
    # window of 24 until token 33. 3 sliding + 3 full layers of one page size form 2 groups
    # of 3: 3 tensors of page 2 x 16 x 2 heads x 32 x 2 B = 4,096 B per block id.
    page = 2 * 16 * 2 * 32 * 2
    for tokens in range(25, 34):
        full = -(-tokens // 16)
        sliding = 2 if tokens < 33 else 3
        result = _run(MODELS["sliding"], "bf16", "vllm", tokens=tokens, batch=1)
        assert result.ok, tokens
        assert result.measured_bytes == 3 * page * (full + sliding + 1), tokens  # + null block


@needs_torch
def test_chunk_not_a_multiple_of_the_block():
    # a chunk of 20 spans at most 2 blocks of 16 (blocks before the chunk start are freed)
    spec = _spec("odd-chunk", [ChunkedLocal(2, 32, chunk=20)])
    assert _run(spec, "bf16", "vllm", tokens=50, batch=1).ok


# --- safety ---------------------------------------------------------------------------------

@needs_torch
def test_refuses_what_does_not_fit_and_says_what_does(monkeypatch):
    monkeypatch.setattr(allocate, "_available_cpu_bytes", lambda: 100 * 2**20)  # 100 MiB free
    import torch

    def no_alloc(*a, **k):
        raise AssertionError("allocated despite the refusal")

    monkeypatch.setattr(torch, "zeros", no_alloc)
    monkeypatch.setattr(torch, "empty", no_alloc)
    res = invoke("llama-3.1-8b", "-t", "1k", "-b", "4", "--layout", "hf-dynamic")
    assert res.exit_code == 2
    # 128 KiB per token: one request of 1,024 tokens is 128 MiB > 90 MiB (the budget), so no
    # batch fits; 5 of 32 layers x 4 requests are 80 MiB
    assert "nothing was allocated" in res.output
    assert "fits instead: --layers 5" in res.output


@needs_torch
def test_ctrl_c_frees_every_tensor(monkeypatch):
    import torch

    alive: list[weakref.ref] = []
    real_empty = torch.empty

    def tracked(*a, **k):
        t = real_empty(*a, **k)
        alive.append(weakref.ref(t))
        return t

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "empty", tracked)
    monkeypatch.setattr(allocate, "_rank_result", interrupted)
    for layout in ("vllm", "hf-static"):
        with pytest.raises(KeyboardInterrupt):
            _run(MODELS["sliding"], "bf16", layout)
    assert alive and all(ref() is None for ref in alive)


@needs_torch
def test_layers_subset_scales_up():
    res = invoke("llama-3.1-8b", "-t", "100", "--layers", "4", "--layout", "hf-static",
                 "-f", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    per_layer = 2 * 8 * 128 * 2 * 100
    assert doc["layers_validated"] == 4 and doc["measured_bytes"] == 4 * per_layer
    assert doc["scaled_measured_bytes"] == doc["full_predicted_bytes"] == 32 * per_layer
    table = invoke("llama-3.1-8b", "-t", "100", "--layers", "4")
    assert "Scaled up: 4 of 32 layers validated" in table.stdout


@needs_torch
def test_paged_layouts_refuse_recent_token_formats():
    res = invoke("llama-3.1-8b", "-t", "64", "--kv-dtype", "int4:g64:r128")
    assert res.exit_code == 2 and "hf-dynamic" in res.output


def test_missing_torch_is_one_line_saying_how_to_install():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import kvplan.cli.validate\n"
            "from kvplan.cli import main\n"
            "sys.argv = ['kvplan', 'validate', 'llama-3.1-8b', '-t', '64']\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == ["kvplan: error: kvplan validate needs torch, which is not installed: "
                     "pip install 'torch>=2.1'"]


def test_validate_help_does_not_import_torch():
    code = ("import sys\nimport kvplan.cli.validate\nfrom kvplan.cli import main\n"
            "sys.argv = ['kvplan', 'validate', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert "NO-TORCH" in proc.stderr and "--layout" in proc.stdout


# --- decode check ---------------------------------------------------------------------------

@needs_torch
def test_decode_steps_time_attention_over_the_cache():
    result = _run(MODELS["sliding"], "bf16", "hf-static", tokens=50, batch=2, max_len=64,
                  decode_steps=3)
    decode = result.ranks[0].decode
    assert decode is not None and decode.steps == 3 and decode.ns_per_step > 0
    # 3 full layers read 50 tokens, 3 sliding layers their 24-token window: K+V, 2 heads x 32
    assert decode.bytes_per_step == decode.predicted_bytes_per_step == (
        2 * 3 * (50 + 24) * 2 * 2 * 32 * 2)
    assert decode.achieved_bytes_per_s > 0 and decode.floor_ns_per_step is None  # CPU


@needs_torch
def test_decode_needs_a_dense_float_cache():
    with pytest.raises(BadInputError, match="dense"):
        _run(MODELS["gqa"], "bf16", "vllm", decode_steps=2)
    with pytest.raises(BadInputError, match="cannot read"):
        _run(MODELS["gqa"], "int4", "hf-static", decode_steps=2)


# --- several ranks --------------------------------------------------------------------------

@pytest.mark.slow  # ~7 s: starts two torch.distributed processes
@needs_torch
def test_two_gloo_ranks_each_measure_their_shard(tmp_path):
    # One launch of two rank processes (each imports torch: seconds on a small machine),
    # through the CLI, on the hybrid model so that heads and state tensors are both sharded.
    from kvplan.sources.yamlspec import dump_yaml

    spec = MODELS["hybrid"]
    path = tmp_path / "hybrid.yaml"
    path.write_text(dump_yaml(spec))
    res = invoke(str(path), "-t", "50", "-b", "2", "--layout", "hf-dynamic", "--tp", "2",
                 "--device", "cpu", "-f", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    ranks = doc["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert doc["measured_bytes"] == min(r["measured_bytes"] for r in ranks)
    single = _run(spec, "bf16", "hf-dynamic", tp=2)  # the same shard, measured in-process
    for r in ranks:
        assert r["device"] == "cpu" and r["diff_bytes"] == 0
        assert r["measured_bytes"] == single.measured_bytes
    # per rank: attention K+V x 2 requests x 50 tokens x 1 head (2 // 2) x 32 x 2 B, 2 layers;
    # state per request, 4 layers: HF's conv state keeps the whole kernel (3 + 1, 96 / 2),
    # not kernel - 1 (docs/engine-kv-sizing.md §4.2), bf16; ssm (4 / 2, 16, 8) fp32
    shard = 2 * (2 * 2 * 50 * 1 * 32 * 2) + 4 * 2 * ((3 + 1) * 48 * 2 + 2 * 16 * 8 * 4)
    assert ranks[0]["measured_bytes"] == shard
    tp1 = _run(spec, "bf16", "hf-dynamic")
    assert ranks[0]["measured_bytes"] < tp1.measured_bytes


# --- CUDA (skipped without a GPU) -----------------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("layout", v.layouts())
def test_cuda_payload_and_allocator(layout):
    result = v.validate(v.ValidateRequest(MODELS["sliding"], parse_format("bf16"), 50, 2,
                                          layout=layout, device="cuda"))
    rank = result.ranks[0]
    assert result.ok and rank.device.startswith("cuda")
    assert rank.allocated_bytes is not None and rank.allocated_bytes >= rank.measured_bytes
    assert rank.device_free_drop_bytes is not None and rank.resident_bytes is None


@needs_cuda
def test_cuda_decode_reports_the_floor_when_the_catalog_knows_the_gpu():
    result = v.validate(v.ValidateRequest(MODELS["gqa"], parse_format("bf16"), 512, 4,
                                          layout="hf-static", device="cuda", decode_steps=5))
    decode = result.ranks[0].decode
    assert decode is not None and decode.gpu and decode.ns_per_step > 0


@needs_cuda
@pytest.mark.skipif(not _cuda() or __import__("torch").cuda.device_count() < 2,
                    reason="needs 2 GPUs")
def test_two_nccl_ranks():
    request = v.ValidateRequest(MODELS["gqa"], parse_format("bf16"), 64, 2, tp=2,
                                device="cuda")
    ranks = v.launch_ranks(request, timeout_s=300)
    assert [r.diff_bytes for r in ranks] == [0, 0]


def test_results_are_frozen_dataclasses_of_ints():
    # @record types: dataclasses whose instances refuse assignment as a frozen dataclass does
    for cls in (v.KindResult, v.RankResult, v.ValidateResult, v.DecodeResult):
        assert dataclasses.is_dataclass(cls)
        blank = object.__new__(cls)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(blank, dataclasses.fields(cls)[0].name, 0)


# --- within memory ----------------------------------------------------------------------------

@needs_torch
def test_says_what_it_will_allocate_before_allocating():
    res = invoke("llama-3.1-8b", "-t", "64", "--layout", "hf-dynamic", "-f", "json")
    assert res.exit_code == 0, res.output
    # K and V of 32 layers: 64 tensors, 2 x 8 heads x 128 x 2 B x 64 tokens x 32 layers
    expected = 2 * 8 * 128 * 2 * 64 * 32
    assert f"({expected:,} bytes) in 64 tensors on cpu" in res.stderr
    assert json.loads(res.stdout)["measured_bytes"] == expected


@needs_torch
def test_allocations_never_touch_their_pages(monkeypatch):
    import torch

    def no_zeros(*a, **k):
        raise AssertionError("zero-filled an allocation")

    monkeypatch.setattr(torch, "zeros", no_zeros)
    for layout in v.layouts():
        assert _run(MODELS["sliding"], "bf16", layout, max_len=64).ok, layout


@needs_torch
def test_memory_running_out_midway_stops_before_the_next_tensor_and_frees(monkeypatch):
    import torch

    # enough free memory for the up-front check, then another process takes it all: the check
    # before each tensor refuses the next one
    readings = iter([10 * 2**30] * 3)
    monkeypatch.setattr(allocate, "_available_cpu_bytes", lambda: next(readings, 2**20))
    alive: list[weakref.ref] = []
    real_empty = torch.empty

    def tracked(*a, **k):
        t = real_empty(*a, **k)
        if t.numel():
            alive.append(weakref.ref(t))
        return t

    monkeypatch.setattr(torch, "empty", tracked)
    # vllm: one pool tensor per layer, each checked before it is allocated
    res = invoke("llama-3.1-8b", "-t", "64", "--layout", "vllm")
    assert res.exit_code == 2, res.output
    assert "everything allocated was freed" in res.output
    assert "kvplan: validate allocates" in res.output  # said before it started
    assert alive and all(ref() is None for ref in alive)


@needs_torch
def test_all_reports_progress_only_to_its_listener():
    seen: list[v.Progress] = []
    result = v.validate_all(specs=[MODELS["gqa"], MODELS["hybrid"]], progress=seen.append)
    assert result.ok and len(result.rows) == 2 * len(v.layouts())
    assert [s.done for s in seen] == list(range(2 * len(v.layouts())))
    assert seen[0].total == 2 * len(v.layouts()) and seen[0].label == "gqa vllm"


@needs_torch
def test_a_plugin_engine_layout_is_validated_with_no_change_to_validate():
    """validate knows layouts only through the registry: an engine defined here, whose cache
    rounds every request up to 32-token chunks in one pool with 2 spare chunks, is listed as
    --layout toy, allocated from its description and checked against the formulas."""
    from kvplan.core.dtypes import cdiv
    from kvplan.engines import registry
    from kvplan.engines.base import BaseEngine
    from kvplan.engines.cache import CacheLayer, CacheLayout

    class Toy(BaseEngine):
        name, display_name = "toy", "Toy"
        cache_variants = ("",)

        def cache_layout(self, spec, fmt, tokens, batch, *, tp=1, block_size=None,
                         max_len=None, variant=""):
            rows = (batch * cdiv(tokens, 32) + 2) * 32
            return CacheLayout(paged=False, block_tokens=32, batch=batch, axes="pool",
                               layers=tuple(CacheLayer(i, str(i), x, x.kind, slots=rows)
                                            for i, x in enumerate(spec.layers)),
                               note="Toy: {batch} requests in 32-token chunks.")

    registry.register(Toy())
    v.cache_layout.cache_clear()
    try:
        assert "toy" in v.layouts()
        result = _run(MODELS["gqa"], "bf16", "toy", tokens=50, batch=2)
        # (2 requests x 2 chunks + 2 spare) x 32 rows x K+V x 2 heads x 64 x bf16 x 3 layers
        assert result.ok and result.measured_bytes == (2 * 2 + 2) * 32 * 2 * 2 * 64 * 2 * 3
        assert result.block_size == 32 and result.layout_note.startswith("Toy:")
    finally:
        registry.unregister("toy")
        v.cache_layout.cache_clear()
    assert "toy" not in v.layouts()
