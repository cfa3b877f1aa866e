"""llama.cpp partial offload (-ngl N) and --no-kv-offload (kvplan.engines.llamacpp).

Rules from llama.cpp's source (2025-2026 master): `src/llama-model.cpp::load_tensors` puts
layer `il` (0..n_layer-1 repeating, n_layer = the output layer) on a GPU when
`il >= i_gpu_start`, with `i_gpu_start = max(n_layer + 1 - N, 0)` since PR #18148
(2025-12-17; before it `max(n_layer - N, 0)`); the input layer (token embeddings) always on the
CPU. `src/llama-kv-cache.cpp` (the llama_kv_cache constructor) puts each layer's K and V on
`model.dev_layer(il)` when offloading, on the CPU buffer type otherwise. Real logs in
tests/fixtures/engines/offload-logs.yaml; docs/engine-accuracy.md section 7 holds the table
`offload_table()` prints (a test keeps it current).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/

import paths
import pytest
import yaml
from accuracy_doc import assert_in_accuracy_doc
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError, SpecError
from kvplan.engines import llamacpp
from kvplan.engines.base import Deployment
from kvplan.planning.plan import capacity
from kvplan.sources.gpus import find_gpu
from kvplan.sources.library import resolve

FIXTURES = paths.FIXTURES / "engines"
LOGS = yaml.safe_load((FIXTURES / "offload-logs.yaml").read_text(encoding="utf-8"))["entries"]
BY_ID = {e["id"]: e for e in LOGS}
MIB = 2**20
GIB = 2**30
LLAMA8B_KV_LAYER_TOKEN = 2 * 8 * 128 * 2  # K and V, 8 KV heads x 128, f16: per layer per token


def spec_of(name: str):
    local = FIXTURES / "models" / f"{name}.json"
    return resolve(str(local) if local.exists() else name)


# --- which layers go to the GPU -----------------------------------------------------------

@pytest.mark.parametrize(("ngl", "new", "old"), [
    # (N, (repeating, output) since PR #18148, (repeating, output) before it); n_layer = 32
    (0, (0, False), (0, False)),
    (1, (0, True), (1, False)),
    (20, (19, True), (20, False)),
    (32, (31, True), (32, False)),
    (33, (32, True), (32, True)),
    (99, (32, True), (32, True)),
    (-1, (32, True), (32, True)),
    (None, (32, True), (32, True)),
])
def test_offload_rule_both_builds(ngl, new, old):
    assert llamacpp.offload(32, ngl) == new
    assert llamacpp.offload(32, ngl, output_first=False) == old


def test_offloaded_count_is_what_the_log_prints():
    # "offloaded min(N, n_layer + 1)/(n_layer + 1) layers to GPU" (load_tensors)
    for ngl in range(0, 40):
        for first in (True, False):
            layers, output = llamacpp.offload(32, ngl, output_first=first)
            assert layers + output == min(ngl, 33)


@pytest.mark.parametrize(("text", "count"), [("20", 20), ("0", 0), ("all", None),
                                             ("auto", None), ("-1", None), (" 99 ", 99)])
def test_gpu_layer_count(text, count):
    assert llamacpp.gpu_layer_count(text) == count


def test_bad_gpu_layer_count_names_the_flag():
    with pytest.raises(BadInputError, match="--n-gpu-layers"):
        llamacpp.gpu_layer_count("twenty")


# --- where the KV cache lives ---------------------------------------------------------------

def test_kv_of_the_offloaded_layers_is_on_the_gpu():
    spec = resolve("llama-3.1-8b")
    p = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=8192, n_gpu_layers=20))
    # -ngl 20 in a 2026 build: the output layer and the last 19 of 32 layers
    assert (p.gpu_layers, p.output_on_gpu) == (19, True)
    assert p.gpu_kv_bytes == 19 * 8192 * LLAMA8B_KV_LAYER_TOKEN
    assert p.host_kv_bytes == 13 * 8192 * LLAMA8B_KV_LAYER_TOKEN
    old = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=8192, n_gpu_layers=20,
                                                         output_first=False))
    assert old.gpu_kv_bytes == 20 * 8192 * LLAMA8B_KV_LAYER_TOKEN


def test_no_kv_offload_keeps_every_layer_on_the_host():
    spec = resolve("llama-3.1-8b")
    p = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=8192, no_kv_offload=True))
    assert p.gpu_kv_bytes == 0
    assert p.host_kv_bytes == 32 * 8192 * LLAMA8B_KV_LAYER_TOKEN


def test_full_offload_keeps_the_whole_cache_on_the_gpu():
    p = llamacpp.profile(resolve("llama-3.1-8b"), llamacpp.LlamacppConfig(ctx=8192))
    assert p.gpu_kv_bytes == p.total_bytes == 32 * 8192 * LLAMA8B_KV_LAYER_TOKEN


# --- where the weights live ------------------------------------------------------------------

def test_weights_output_and_last_layers_on_the_gpu_embeddings_on_the_host():
    spec = resolve("llama-3.1-8b")
    total = 2 * 8030261248  # bf16: 2 bytes x parameters
    embedding = head = 128256 * 4096 * 2  # untied: token_embd and output, bf16
    layers = total - embedding - head
    w = llamacpp.place_weights(Deployment(spec, engine="llamacpp"), 19, True)
    assert w.gpu_bytes == layers * 19 // 32 + head
    assert w.host_bytes == embedding + layers - layers * 19 // 32
    old = llamacpp.place_weights(Deployment(spec, engine="llamacpp"), 20, False)
    assert old.gpu_bytes == layers * 20 // 32
    assert old.host_bytes == embedding + head + layers - layers * 20 // 32


def test_the_embedding_tensors_bytes_are_its_shape_not_a_parameter_share():
    # token_embd is vocab x hidden values: DeepSeek-R1 (config.json: vocab_size 129,280,
    # hidden_size 7,168, untied) in bf16 holds 129,280 x 7,168 x 2 = 1,853,358,080 B in it and
    # as much in `output`, whatever the model's parameter count says of the rest
    spec = resolve("deepseek-r1")
    table = 129280 * 7168 * 2
    assert table == 1853358080
    w = llamacpp.place_weights(Deployment(spec, engine="llamacpp", weights_dtype="bf16"), 0,
                               True)
    assert (w.embedding_bytes, w.output_bytes, w.gpu_bytes) == (table, table, table)
    # Llama 3.2 1B ties them: one 128,256 x 2,048 bf16 table, its copy on the GPU as output
    tied = llamacpp.place_weights(Deployment(resolve("llama-3.2-1b"), engine="llamacpp"), 0,
                                  True)
    assert (tied.embedding_bytes, tied.output_bytes) == (128256 * 2048 * 2,) * 2


# --- the plan ---------------------------------------------------------------------------------

RTX4090 = find_gpu("rtx-4090").memory_bytes


def test_a_context_too_long_for_the_gpu_fits_with_fewer_layers():
    # Llama-3.1-8B bf16 (16 GB) + 128k cells of KV (16 GiB) do not fit a 24 GB card; with
    # -ngl 8 (output + 7 layers) the GPU holds 7/32 of the layers' weights and KV
    dep = Deployment(resolve("llama-3.1-8b"), engine="llamacpp", max_model_len=131072,
                     gpu_name="RTX 4090", gpu_memory_bytes=RTX4090)
    assert capacity(dep).pool.constraints[0].capacity == 0
    cap = capacity(replace(dep, n_gpu_layers="8"))
    rows = dict(cap.engine.memory_rows(cap))
    layers = 2 * 8030261248 - 2 * 128256 * 4096 * 2
    assert rows["- weights"] == layers * 7 // 32 + 128256 * 4096 * 2
    assert rows["- KV cache"] == 7 * 131072 * LLAMA8B_KV_LAYER_TOKEN
    assert rows["host memory: KV cache"] == 25 * 131072 * LLAMA8B_KV_LAYER_TOKEN
    assert rows["host memory: weights"] == 128256 * 4096 * 2 + layers - layers * 7 // 32
    assert rows["= left"] > 0 and cap.pool.constraints[0].capacity == 131072
    assert any("-ngl 8: 7 of 32 repeating layers" in n for n in cap.notes)


def test_pipeline_parallel_only_with_every_layer_and_the_kv_offloaded():
    assert llamacpp.pipeline_parallel(2, 32, None, False)
    assert llamacpp.pipeline_parallel(2, 32, 33, False)
    assert not llamacpp.pipeline_parallel(2, 32, 32, False)  # the output layer not counted
    assert not llamacpp.pipeline_parallel(2, 32, None, True)
    assert not llamacpp.pipeline_parallel(1, 32, None, False)


def _json(*args: str) -> dict[str, Any]:
    import json

    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _numbers(out: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("gpu_kv_bytes", "host_kv_bytes", "gpu_layers"):
                    found[k] = v
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(out)
    return found


def test_plan_flags_and_launch_command_reach_the_engine():
    base = ("plan", "llama-3.1-8b", "--gpu", "rtx-4090", "--engine", "llamacpp",
            "--max-model-len", "8192", "--format", "json")
    flags = _numbers(_json(*base, "-ngl", "20", "-nkvo"))
    assert flags == {"gpu_layers": 19, "gpu_kv_bytes": 0,
                     "host_kv_bytes": 32 * 8192 * LLAMA8B_KV_LAYER_TOKEN}
    command = _numbers(_json("plan", "--from-command",
                             "llama-server -m llama-3.1-8b -c 8192 -ngl 20 --no-kv-offload",
                             "--gpu", "rtx-4090", "--format", "json"))
    assert command == flags
    result = CliRunner().invoke(app, ["plan", "--from-command",
                                      "llama-server -m llama-3.1-8b -c 8192 -ngl 20",
                                      "--gpu", "rtx-4090"], env={"COLUMNS": "100"})
    assert result.exit_code == 0 and "n_gpu_layers" not in result.output  # no "not modelled"
    assert "host memory: KV cache" in result.stdout


def test_capacity_plan_file_reads_gpu_layers(tmp_path):
    from kvplan.planning import check

    path = tmp_path / "plan.yaml"
    path.write_text("""\
schema: kvplan.capacity/1
deployments:
  - name: laptop
    model: llama-3.1-8b
    gpu: rtx-4090
    max_model_len: 8192
    engine: {name: llamacpp, n_gpu_layers: 20, no_kv_offload: true}
    requires: {min_concurrency: {concurrency: 1, context: 8k}}
""", encoding="utf-8")
    dep = check.load_plan(path).deployments[0].deployment
    assert (dep.n_gpu_layers, dep.no_kv_offload) == ("20", True)
    path.write_text(path.read_text().replace("n_gpu_layers: 20", "n_gpu_layers: many"))
    with pytest.raises(SpecError, match="engine.n_gpu_layers"):
        check.load_plan(path)


# --- real logs ----------------------------------------------------------------------------

def predict(e: dict[str, Any]) -> llamacpp.LlamacppProfile:
    s = e["settings"]
    return llamacpp.profile(spec_of(e["model"]), llamacpp.LlamacppConfig(
        ctx=s["n_ctx"], n_ubatch=s["n_ubatch"], flash_attn=llamacpp.flash_attn_on(s["flash_attn"]),
        n_gpu_layers=s["n_gpu_layers"], output_first=e["rule"] == "output_first"))


def split_by_kind(e: dict[str, Any]) -> dict[str, float]:
    """kvplan's per-layer bytes summed as the log prints them: KV and recurrent state (RS),
    on the GPU and on the host (MiB)."""
    from kvplan.core.layers import RecurrentState

    p, spec = predict(e), spec_of(e["model"])
    first_gpu = len(p.layer_bytes) - p.gpu_layers
    out = {"gpu_kv_mib": 0.0, "host_kv_mib": 0.0, "gpu_rs_mib": 0.0, "host_rs_mib": 0.0}
    for i, (layer, size) in enumerate(zip(spec.layers, p.layer_bytes, strict=True)):
        kind = "rs" if isinstance(layer, RecurrentState) else "kv"
        out[f"{'gpu' if i >= first_gpu else 'host'}_{kind}_mib"] += size / MIB
    return out


@pytest.mark.parametrize("e", LOGS, ids=[e["id"] for e in LOGS])
def test_layers_on_the_gpu_as_the_log_says(e):
    p = predict(e)
    assert p.gpu_layers + p.output_on_gpu == e["reported"]["offloaded"]
    assert len(p.layer_bytes) + 1 == e["reported"]["layers"]


@pytest.mark.parametrize("e", LOGS, ids=[e["id"] for e in LOGS])
def test_kv_split_against_logs(e):
    got = split_by_kind(e)
    for key, logged in e["reported"].items():
        if key in got:
            assert got[key] == pytest.approx(logged, abs=0.005), key  # the log rounds to 0.01


def test_weights_on_the_gpu_against_the_mistral_log():
    e = BY_ID["llamacpp-mistral7b-q4km-ngl20-c768-old-rule"]
    p = predict(e)
    dep = Deployment(spec_of(e["model"]), engine="llamacpp",
                     weights_bytes=int(e["weights_total_gib"] * GIB))
    got = llamacpp.place_weights(dep, p.gpu_layers, p.output_on_gpu).gpu_bytes / MIB
    # 20 of 32 layers of the file (a parameter share; Q4_K_M mixes tensor types), within 1%
    assert got == pytest.approx(e["reported"]["gpu_model_mib"], rel=0.01)


def offload_table() -> str:
    rows = ["| log | -ngl rule | quantity | logged | kvplan | error | counted |",
            "| --- | --- | --- | ---: | ---: | ---: | --- |"]

    def add(e: dict[str, Any], what: str, logged: float, got: float, counted: bool) -> None:
        err = (got - logged) / logged if logged else 0.0
        rows.append(f"| {e['id']} | {e['rule']} | {what} | {logged:,.2f} | {got:,.2f} | "
                    f"{err:+.2%} | {'yes' if counted else 'no'} |")

    names = {"gpu_kv_mib": "GPU KV MiB", "host_kv_mib": "CPU KV MiB",
             "gpu_rs_mib": "GPU recurrent state MiB", "host_rs_mib": "CPU recurrent state MiB"}
    for e in LOGS:
        p = predict(e)
        r = e["reported"]
        add(e, f"-ngl {e['settings']['n_gpu_layers']}: layers offloaded", r["offloaded"],
            p.gpu_layers + p.output_on_gpu, e["counted"])
        got = split_by_kind(e)
        for key, name in names.items():
            if key in r:
                add(e, name, r[key], got[key], e["counted"])
        if "gpu_model_mib" in r:
            dep = Deployment(spec_of(e["model"]), engine="llamacpp",
                             weights_bytes=int(e["weights_total_gib"] * GIB))
            w = llamacpp.place_weights(dep, p.gpu_layers, p.output_on_gpu)
            add(e, "GPU model MiB (from the file size, by parameter share)", r["gpu_model_mib"],
                w.gpu_bytes / MIB, False)
        if "gpu_compute_mib" in r and p.compute is not None:
            add(e, "GPU compute MiB (full-offload estimate; partial offload not modelled)",
                r["gpu_compute_mib"], p.compute.gpu_mib, False)
    return "\n".join(rows) + "\n"


def test_offload_doc_is_current():
    assert_in_accuracy_doc(offload_table(), __file__)


if __name__ == "__main__":
    print(offload_table(), end="")
