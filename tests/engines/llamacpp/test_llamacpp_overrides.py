"""llama.cpp's tensor buffer-type overrides (-ot, --cpu-moe, --n-cpu-moe): the weights they
keep in host memory (kvplan.engines.llamacpp.overrides).

Bytes are hand-computed from DeepSeek-R1's GGUF tensor shapes (config.json: hidden 7168,
moe_intermediate_size 2048, 256 routed experts, 61 layers of which the first 3 are dense):
each MoE layer holds blk.N.ffn_{gate,up,down}_exps.weight of 256 x 2048 x 7168 values, so
3 x 256 x 2048 x 7168 = 11,274,289,152 parameters, 2 bytes each in bf16.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/

import pytest
from click.testing import Result
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError
from kvplan.core.weights import WeightTensor
from kvplan.engines.llamacpp.overrides import Override, gguf_name, parse_overrides

MIB = 2**20
EXPERT_LAYER_BYTES = 3 * 256 * 2048 * 7168 * 2  # one MoE layer's routed experts, bf16
MOE_LAYERS = 61 - 3


def weights_rows(*flags: str) -> dict[str, int]:
    r = CliRunner().invoke(app, ["plan", "deepseek-r1", "--engine", "llamacpp", "--gpu-memory",
                                 "2000GiB", "--weights-dtype", "bf16", "--context", "4096",
                                 *flags])
    assert r.exit_code == 0, r.output
    rows = {}
    for line in r.output.splitlines():
        for key in ("- weights", "host memory: weights"):
            if line.strip().startswith(key):
                rows[key] = int(line.split(key)[1].split()[0].replace(",", ""))
    return rows


def test_all_experts_on_the_host_leave_the_rest_on_the_gpu():
    base = weights_rows()["- weights"]
    for flags in (("-ot", "exps=CPU"), ("--cpu-moe",),
                  ("-ot", r"\.ffn_(up|down|gate)_exps\.weight$=CPU")):
        rows = weights_rows(*flags)
        assert rows["host memory: weights"] == MOE_LAYERS * EXPERT_LAYER_BYTES, flags
        assert rows["- weights"] == base - MOE_LAYERS * EXPERT_LAYER_BYTES, flags


def test_n_cpu_moe_counts_the_first_layers_dense_ones_too():
    # llama.cpp common/arg.cpp: blk.0 .. blk.4; blk.0-2 are dense, so two MoE layers
    assert weights_rows("--n-cpu-moe", "5")["host memory: weights"] == 2 * EXPERT_LAYER_BYTES


def test_several_ot_entries_add_up_and_the_first_match_decides():
    # blk.10-19 on the host; then blk.1[0-4] named for the GPU first: only 15-19 move
    one = weights_rows("-ot", r"blk\.(1[0-9])\.ffn_.*_exps\.=CPU")
    assert one["host memory: weights"] == 10 * EXPERT_LAYER_BYTES
    two = weights_rows("-ot", r"blk\.(1[0-4])\.ffn_.*_exps\.=CUDA0,"
                       r"blk\.(1[0-9])\.ffn_.*_exps\.=CPU")
    assert two["host memory: weights"] == 5 * EXPERT_LAYER_BYTES
    # a launch line's -ot given twice: both entries, in order (llama.cpp appends them)
    line = (r"llama-server -m x.gguf -c 4096 -ot blk\.(1[0-4])\.ffn_.*_exps\.=CUDA0 "
            r"-ot blk\.(1[0-9])\.ffn_.*_exps\.=CPU")
    r = CliRunner().invoke(app, ["plan", "deepseek-r1", "--from-command", line, "--gpu-memory",
                                 "2000GiB", "--weights-dtype", "bf16"])
    assert r.exit_code == 0, r.output
    assert f"{5 * EXPERT_LAYER_BYTES:,}" in r.output


def test_gguf_names():
    t = WeightTensor("model.layers.7.mlp.experts.up_proj.weight", (2048, 7168), "BF16", 7,
                     "layer", 256)
    assert gguf_name(t) == "blk.7.ffn_up_exps.weight"
    t = WeightTensor("model.layers.7.mlp.shared_experts.down_proj.weight", (7168, 2048),
                     "BF16", 7, "layer")
    assert gguf_name(t) == "blk.7.ffn_down_shexp.weight"
    assert gguf_name(WeightTensor("model.embed_tokens.weight", (8, 8), "BF16", None,
                                  "embed")) == "token_embd.weight"


def test_parse_overrides():
    assert parse_overrides("exps=CPU,attn=CUDA0") == (Override("exps", "CPU"),
                                                      Override("attn", "CUDA0"))
    assert Override("exps", "CPU").host and not Override("exps", "CUDA0").host


@pytest.mark.parametrize("text, said", [("exps", "not PATTERN=BUFFER_TYPE"),
                                        ("exps=GPU", "not a llama.cpp buffer type"),
                                        ("(a+)+b=CPU", "exponential matching time")])
def test_bad_overrides_are_refused_by_flag(text, said):
    with pytest.raises(BadInputError, match=said) as exc:
        parse_overrides(text)
    assert "--override-tensor" in str(exc.value)


def test_a_launch_line_with_repeated_ot_exits_0_on_the_posted_card():
    # ik_llama.cpp PR #259, ubergarm's 64k-context comment: DeepSeek-R1 on a 48 GiB GPU with
    # the experts on the host; the log's "KV self size = 4392.00 MiB"
    line = ("llama-server --model DeepSeek-R1-UD-Q2_K_XL-00001-of-00005.gguf --ctx-size 65536 "
            "--parallel 1 -mla 2 -fa -amb 2048 -fmoe -rtr --n-gpu-layers 63 "
            "--override-tensor exps=CPU --threads 24")
    r = CliRunner().invoke(app, ["plan", "deepseek-r1", "--from-command", line,
                                 "--gpu-memory", "48GiB"])
    assert r.exit_code == 0, r.output
    assert "4,605,345,792" in r.output  # 4392.00 MiB x 2^20


def test_a_quantized_weight_moves_with_its_scales():
    # DeepSeek-R1's own fp8 checkpoint: each expert matrix 2048 x 7168 one byte a value plus
    # its 128 x 128 block scales, 16 x 56 float32 (weight_scale_inv), one GGUF tensor
    r = CliRunner().invoke(app, ["plan", "deepseek-r1", "--engine", "llamacpp", "--gpu-memory",
                                 "2000GiB", "--context", "4096", "--cpu-moe"])
    assert r.exit_code == 0, r.output
    per_layer = 3 * 256 * (2048 * 7168 + 16 * 56 * 4)
    assert f"{MOE_LAYERS * per_layer:,}" in r.output
    # gpt-oss-120b's mxfp4 experts: 17 bytes a 32-value block (ggml-common.h block_mxfp4),
    # 128 experts of 2880 x 2880 in each of gate, up and down, and their bf16 biases
    r = CliRunner().invoke(app, ["plan", "gpt-oss-120b", "--engine", "llamacpp",
                                 "--gpu-memory", "200GiB", "--context", "4096",
                                 "--n-cpu-moe", "1"])
    assert r.exit_code == 0, r.output
    assert f"{3 * 128 * (2880 * 2880 // 32 * 17 + 2880 * 2):,}" in r.output


def _kv_total(*flags: str) -> Result:
    return CliRunner().invoke(app, ["plan", "deepseek-r1", "--engine", "llamacpp",
                                    "--kv-memory", "100GiB", "--max-model-len", "163840",
                                    *flags])


def test_ik_llama_mla_1_without_flash_attention_keeps_a_transposed_latent():
    # ik_llama.cpp (2025-02-26, a DeepSeek-R1 run at 163,840 tokens with -mla 1, no -fa):
    # "KV self size = 20740.00 MiB, c^KV (f16): 10980.00 MiB, kv^T (f16): 9760.00 MiB";
    # by hand: 61 layers x 576 x 2 B x 163,840 and 61 x 512 x 2 B x 163,840
    latent, transposed = 61 * 576 * 2 * 163840, 61 * 512 * 2 * 163840
    assert (latent, transposed) == (10980 * MIB, 9760 * MIB)
    r = _kv_total("--mla-use", "1", "--flash-attn", "off", "--verbose")
    assert r.exit_code == 0, r.output
    assert f"{latent + transposed:,}" in r.output
    for flags in (("--mla-use", "1", "--flash-attn", "on"), ("--mla-use", "2", "--flash-attn",
                                                             "off"), ("--mla-use", "3")):
        r = _kv_total(*flags, "--verbose")
        assert r.exit_code == 0, r.output
        assert f"{latent:,}" in r.output and f"{latent + transposed:,}" not in r.output, flags


def test_ik_llama_mla_0_is_named_not_modelled():
    r = _kv_total("--mla-use", "0")
    assert r.exit_code == 2
    assert "-mla 0" in r.output


def test_the_decode_floor_names_the_weights_it_does_not_time():
    # the experts -ot keeps in host memory are computed with from there each step; the floor
    # times the GPU's reads alone (kvplan knows no host memory bandwidth) and says how many
    # bytes it leaves out: the 58 MoE layers' routed experts, as above
    r = CliRunner().invoke(app, ["plan", "deepseek-r1", "--engine", "llamacpp", "--gpu", "h100",
                                 "--weights-dtype", "bf16", "--context", "4096", "-ot",
                                 "exps=CPU", "--format", "json"])
    assert r.exit_code == 0, r.output
    (title, rows), = json.loads(r.output)["tables"].items()
    assert "weights in host memory not timed" in title
    row = {x["name"]: x["value"] for x in rows}
    assert row["host_weights_bytes_not_timed"] == f"{MOE_LAYERS * EXPERT_LAYER_BYTES:,}"
    # every weight on the GPU: the floor is the whole step's, and says nothing more
    plain = CliRunner().invoke(app, ["plan", "llama-3.1-8b", "--engine", "llamacpp", "--gpu",
                                     "h100", "--context", "4096", "--format", "json"])
    assert plain.exit_code == 0, plain.output
    (title, rows), = json.loads(plain.output)["tables"].items()
    assert "not timed" not in title
    assert "host_weights_bytes_not_timed" not in {x["name"] for x in rows}


def test_memory_rows_read_the_placement_the_capacity_made(monkeypatch):
    """-ngl and -ot place the weights once, in the capacity; the memory rows show that
    placement rather than place them again. Host memory holds the overridden experts and,
    under -ngl, the token embeddings too (always on the CPU), which the capacity's
    host_weights_bytes (what a step reads) leaves out."""
    from kvplan.engines.base import Deployment
    from kvplan.engines.llamacpp import engine as lc
    from kvplan.sources.library import resolve

    dep = Deployment(resolve("deepseek-r1"), engine="llamacpp", gpu_memory_bytes=2000 * 2**30,
                     weights_dtype="bf16", max_model_len=4096, tensor_overrides="exps=CPU")
    caps = [lc.ENGINE.capacity(dep), lc.ENGINE.capacity(replace(dep, n_gpu_layers="99"))]

    def placed_again(*args, **kwargs):
        raise AssertionError("the weights were placed a second time")

    prof = caps[1].engine_profile
    embeddings = lc.place_weights(caps[1].deployment, prof.gpu_layers, prof.output_on_gpu
                                  ).embedding_bytes
    # 129,280 x 7,168 bf16 as the whole model's share of the library's parameter count
    assert abs(embeddings / (129280 * 7168 * 2) - 1) < 0.02
    monkeypatch.setattr(lc, "host_overrides", placed_again)
    monkeypatch.setattr(lc, "place_weights", placed_again)
    experts = MOE_LAYERS * EXPERT_LAYER_BYTES
    rows = [dict(lc.ENGINE.memory_rows(cap) or ()) for cap in caps]
    assert caps[0].host_weights_bytes == rows[0]["host memory: weights"] == experts
    assert caps[1].host_weights_bytes == experts
    assert rows[1]["host memory: weights"] == experts + embeddings
