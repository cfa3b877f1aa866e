"""Regressions found in the package review: each test names the bug it pins."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import paths
from factories import dense
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import parse_format
from kvplan.core.sizing import request_bytes
from kvplan.engines import hf, sglang, vllm
from kvplan.planning.plan import Deployment, capacity
from kvplan.sources.library import resolve
from kvplan.sources.yamlspec import dump_yaml

FIXTURES = paths.FIXTURES / "hf-configs"
GIB = 2**30


def test_deepseek_v32_config_counts_its_indexer_once():
    # The spec read from config.json carries index_head_dim = 128; the engines used to add
    # the family's indexer on top of the layer's own (56,120 B/token on vLLM).
    spec = resolve(str(FIXTURES / "deepseek-ai--DeepSeek-V3.2.json"))
    (stage,) = vllm.layout(spec, vllm.VllmConfig(max_model_len=8192, kv_cache_dtype="fp8"))
    assert stage.per_token_bytes == 61 * (656 + 132) == 48068
    prof = sglang.profile(spec, sglang.SglangConfig(kv_cache_dtype="fp8_e4m3"), 80 * GIB,
                          80 * GIB, 0.9)
    assert prof.cell_size_bytes == 61 * (656 + 132)


def test_hf_plan_holds_encoder_tokens_for_cross_attention():
    # Cross-attention layers hold the encoder's tokens (as engines/hf/caches.py sizes them); the
    # plan's pool used to grow them with the text like full attention.
    spec = resolve("llama-3.2-90b-vision")
    for cache, tokens in (("dynamic", 8192), ("static", spec.max_context_tokens)):
        cap = capacity(Deployment(spec=spec, engine="hf", kv_memory_bytes=80 * GIB,
                                  hf_cache=cache))
        (pool,) = cap.pool.constraints
        assert pool.units(tokens) == hf.profile(spec, cache=cache, seq_len=tokens).cache_bytes


def test_sweep_reads_residual_formats_in_each_models_dtype(tmp_path):
    # `int4:g64:r128` keeps its recent tokens in the model's dtype; the sweep used to read it
    # in the first model's dtype for every model.
    paths = []
    for dtype in ("bf16", "fp32"):
        spec = replace(dense(layers=2), name=f"dense-{dtype}", dtype=dtype)
        path = tmp_path / f"{spec.name}.yaml"
        path.write_text(dump_yaml(spec))
        paths.append(str(path))
    res = CliRunner().invoke(app, ["sweep", *paths, "-t", "64", "--kv-dtype", "int4:g64:r128"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == 2
    for row, dtype in zip(rows, ("bf16", "fp32"), strict=True):
        fmt = parse_format("int4:g64:r128", dtype)
        assert int(row["request_bytes"]) == request_bytes(dense(layers=2).layers, 64, fmt)
