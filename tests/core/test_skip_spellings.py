"""A quantization config's skip list, matched under the checkpoint's names for kvplan's
modules (kvplan.core.weights.skipped).

Multimodal checkpoints name their text layers `model.language_model.layers.N` (transformers'
*ForConditionalGeneration) where kvplan writes `model.layers.N`; vLLM maps the checkpoint's
names onto its own before it matches the list (the model's `hf_to_vllm_mapper`, e.g.
gemma4_mm.py `model.language_model.` -> `language_model.model.`). The two real configs here
are NVIDIA's ModelOpt NVFP4 checkpoints, copied verbatim from ai-dynamo/aiconfigurator
(tests/fixtures/hf-configs/SOURCES.md).
"""

from __future__ import annotations

from paths import FIXTURES

from kvplan.core.weights import inventory, skipped
from kvplan.sources.hfconfig import load_config_file

FAMILIES = FIXTURES / "hf-configs" / "families"


def _layer(tensors, i):
    return {t.name.split(f"model.layers.{i}.", 1)[1]: t for t in tensors
            if t.name.startswith(f"model.layers.{i}.")}


def test_a_multimodal_spelling_matches_at_component_boundaries():
    globs = ("model.language_model.layers.1.self_attn*",)
    assert skipped("model.layers.1.self_attn.q_proj", "attn", globs)
    assert not skipped("model.layers.13.self_attn.q_proj", "attn", globs)
    # the spelling before transformers 4.52, named exactly
    assert skipped("model.layers.0.mlp.down_proj", "mlp",
                   ("language_model.model.layers.0.mlp.down_proj",))
    # Qwen's singular shared_expert
    assert skipped("model.layers.2.mlp.shared_experts.up_proj", "mlp",
                   ("model.language_model.layers.2.mlp.shared_expert*",))
    # routed experts go by kvplan's name only: Gemma 4 keeps them beside its dense `mlp`
    assert not skipped("model.layers.0.mlp.experts.gate_proj", "expert",
                       ("model.language_model.layers.0.mlp*",))
    assert skipped("model.layers.0.mlp.experts.gate_proj", "expert", ("re:.*experts.*",))
    assert not skipped("model.layers.0.self_attn.q_proj", "attn", ())


def test_gemma_4_26b_a4b_nvfp4_keeps_attention_and_the_dense_mlp_in_bf16():
    """nvidia/Gemma-4-26B-A4B-NVFP4: ModelOpt NVFP4 (group 16) on `Linear`, its ignore list
    `model.language_model.layers.N.{mlp,router,self_attn}*` for all 30 layers: only the
    routed experts (`layers.N.experts`, vLLM's `moe.experts`) are NVFP4. By hand, layer 0
    (sliding: 16 query heads and 8 KV heads of 256, hidden 2816, dense MLP 2112, 128
    experts of 704)."""
    spec = load_config_file(FAMILIES / "nvidia--Gemma-4-26B-A4B-NVFP4.json")
    assert spec.quantization.method == "modelopt"
    layer = _layer(inventory(spec, spec.quantization).tensors, 0)
    attn = [t for n, t in layer.items() if n.startswith("self_attn.") and "proj" in n]
    assert {t.dtype for t in attn} == {"BF16"}
    assert sum(t.num_bytes for t in attn) == 2 * 2816 * (16 * 256 + 8 * 256 + 8 * 256 +
                                                         16 * 256)
    mlp = [layer[f"mlp.{p}.weight"] for p in ("gate_proj", "up_proj", "down_proj")]
    assert {t.dtype for t in mlp} == {"BF16"}
    assert sum(t.num_bytes for t in mlp) == 2 * 3 * 2816 * 2112
    assert not any(n.startswith(("self_attn.", "mlp.gate_proj")) and "scale" in n
                   for n in layer)
    # the experts: two e2m1 values a byte and an fp8 scale per 16
    experts = layer["mlp.experts.gate_proj.weight"]
    assert experts.dtype == "U8"
    assert experts.num_bytes == 128 * 704 * 2816 // 2
    assert layer["mlp.experts.gate_proj.weight_scale"].num_bytes == 128 * 704 * 2816 // 16


def test_qwen3_5_122b_a10b_nvfp4_keeps_its_attention_and_shared_expert_in_bf16():
    """nvidia/Qwen3.5-122B-A10B-NVFP4: ModelOpt NVFP4, its ignore list
    `model.language_model.layers.N.{linear_attn*,self_attn*,mlp.shared_expert*}`: the
    Gated DeltaNet and full-attention projections and the shared expert stay bf16, the 256
    routed experts of 1024 are NVFP4. By hand, layer 0 (linear attention, hidden 3072:
    in_proj_qkvz 2 x 16 x 128 + 2 x 64 x 128 outputs) and layer 3 (full attention)."""
    spec = load_config_file(FAMILIES / "nvidia--Qwen3.5-122B-A10B-NVFP4.json")
    tensors = inventory(spec, spec.quantization).tensors
    first, fourth = _layer(tensors, 0), _layer(tensors, 3)
    qkvz = first["linear_attn.in_proj_qkvz.weight"]
    assert (qkvz.dtype, qkvz.num_bytes) == ("BF16", 2 * 3072 * (2 * 16 * 128 + 2 * 64 * 128))
    assert first["linear_attn.out_proj.weight"].dtype == "BF16"
    assert {t.dtype for n, t in fourth.items() if n.startswith("self_attn.") and
            n.endswith("proj.weight")} == {"BF16"}
    shared = first["mlp.shared_experts.up_proj.weight"]
    assert (shared.dtype, shared.num_bytes) == ("BF16", 2 * 3072 * 1024)
    experts = first["mlp.experts.up_proj.weight"]
    assert (experts.dtype, experts.num_bytes) == ("U8", 256 * 1024 * 3072 // 2)
