"""A per-tensor weight inventory computed from a ModelSpec's shapes and its checkpoint format,
and the bytes each rank holds when an engine loads it.

`inventory(spec, q)` lists every tensor of the checkpoint with its exact shape and dtype,
scales included (kvplan.core.quant). With `tp` > 1 the shapes are one rank's shard as vLLM
creates them (column- / row-parallel splits, replicated layers whole, the vocabulary padded
to 64 and divided: `vllm/model_executor/layers/vocab_parallel_embedding.py` `pad_vocab_size`,
here `vocab_shard_rows`); with expert parallelism each rank holds ceil(E / size) experts.
`placement(...)` adds the pipeline stages as vLLM's get_pp_indices splits them. This is an
account from config.json; where safetensors headers are at hand (kvplan.sources.weights)
they are the truth.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

from kvplan.core.dtypes import cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.layers import (
    MLA,
    CompressedAttention,
    CrossAttention,
    NoCache,
    RecurrentState,
)
from kvplan.core.quant import (
    ELEMENT_BYTES,
    MODEL_DTYPE_NAMES,
    NONE,
    Quantization,
    checkpoint_spellings,
    linear_tensors,
    module_format,
)
from kvplan.core.record import record
from kvplan.core.sizing import pp_stages
from kvplan.core.spec import AudioEncoder, Block, ModelSpec, PerLayerInputs, VisionTower

VOCAB_PADDING = 64  # vLLM DEFAULT_VOCAB_PADDING_SIZE

# What a spec field the layout requires (TensorLayout.requires) is, when it is missing
_REQUIRED = {
    "shared_blocks": "the spec does not give the shared attention blocks",
    "audio_encoder": "the spec does not give the audio encoder's shapes",
    "blocks": "the spec does not say what each layer holds (blocks)",
    "vision": "the spec does not give the RADIO encoder's shapes (encoder.args)",
    "per_layer_inputs": "the spec does not give Gemma 3n's per-layer input, AltUp and "
                        "LAuReL shapes",
}


@record
class ExpertLoad:
    """How an engine's MoE kernel holds quantized experts beside the checkpoint's layout:
    widths padded to an alignment, the block scales kept twice (the checkpoint's and a
    re-laid-out copy), biases widened to fp32. The engine module says which applies."""

    width_align: int = 1  # the expert width (per rank) rounded up to this
    hidden_align: int = 1  # the hidden size the experts see rounded up to this
    scale_copies: int = 1
    bias_dtype: str | None = None  # None: the model dtype


@record
class VocabSplit:
    """How an engine lays a vocabulary-parallel table (embedding, LM head) over TP ranks: the
    vocabulary padded to a multiple of `pad_to`, then divided by TP. `exact`: TP must divide
    the padded vocabulary or the engine does not start (vLLM's divide() assertion); else each
    rank holds the rows rounded up (the last rank padded). The default is vLLM's
    (`vocab_shard_rows`); an engine module states its own."""

    pad_to: int = 64
    exact: bool = True


VLLM_VOCAB = VocabSplit()


@record
class WeightTensor:
    """One tensor (or `count` identical ones) of the checkpoint, on one rank."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    layer: int | None  # decoder layer index; None for embeddings, final norm, LM head
    place: str  # "embed", "layer", "final", "head", "mtp"
    count: int = 1
    # parameters of the model this tensor stores (a quantized weight: out x in, however
    # packed; its scales and zero points: 0), times count
    num_params: int = -1

    def __post_init__(self) -> None:
        if self.num_params < 0:
            object.__setattr__(self, "num_params", self.num_elements)

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * self.count

    @property
    def num_bytes(self) -> int:
        return self.num_elements * ELEMENT_BYTES[self.dtype]


@record
class Inventory:
    tensors: tuple[WeightTensor, ...]
    quantization: Quantization
    tp: int = 1

    @property
    def total_bytes(self) -> int:
        return sum(t.num_bytes for t in self.tensors)

    @property
    def total_params(self) -> int:
        return sum(t.num_params for t in self.tensors)

    def bytes_by_dtype(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.dtype] = out.get(t.dtype, 0) + t.num_bytes
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def elements_by_dtype(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.dtype] = out.get(t.dtype, 0) + t.num_elements
        return out

    def bytes_where(self, place: str | None = None, layers: range | None = None) -> int:
        if place is not None and layers is not None:  # a pipeline stage: summed per layer once
            by_layer = self._bytes_by_place_and_layer.get(place, {})
            return sum(by_layer.get(i, 0) for i in layers)
        return sum(t.num_bytes for t in self.tensors
                   if (place is None or t.place == place)
                   and (layers is None or (t.layer is not None and t.layer in layers)))

    @cached_property
    def _bytes_by_place_and_layer(self) -> dict[str, dict[int, int]]:
        out: dict[str, dict[int, int]] = {}
        for t in self.tensors:
            if t.layer is not None:
                per = out.setdefault(t.place, {})
                per[t.layer] = per.get(t.layer, 0) + t.num_bytes
        return out


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether a module name matches one of a config's skip patterns: `re:` a regular
    expression (compressed-tensors), a glob with `*` (gpt-oss "model.layers.*.self_attn"),
    else a dotted name matched at component boundaries ("gate" is mlp.gate, not gate_proj;
    "lm_head"; "model.layers.0.mlp")."""
    dotted = f".{name}."
    for p in patterns:
        if p.startswith("re:"):
            if re.search(p[3:], name):
                return True
        elif "*" in p:
            if fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(name, p + ".*"):
                return True
        elif f".{p.strip('.')}." in dotted:
            return True
    return False


def skipped(name: str, kind: str, patterns: Sequence[str]) -> bool:
    """Whether a config's skip list names the linear kvplan calls `name`, under any of the
    checkpoint's spellings of it (`checkpoint_spellings`: a multimodal model's
    `model.language_model.layers.N`, Qwen's `shared_expert`): vLLM matches the list against
    its own module names after mapping the checkpoint's onto them (the model's
    `hf_to_vllm_mapper`, gemma4_mm.py `model.language_model.` -> `language_model.model.`),
    and NVIDIA's ModelOpt exclude lists name `model.language_model.layers.N.self_attn*`. A
    layer's routed experts by kvplan's name only: where a checkpoint keeps them differs by
    family (Gemma 4's `layers.N.experts`, beside the dense `layers.N.mlp*` such a list
    excludes; vLLM gemma4.py builds them as `layers.N.moe.experts`)."""
    if not patterns:
        return False
    names = (name,) if kind == "expert" else checkpoint_spellings(name)
    return any(matches(n, patterns) for n in names)


@record
class ViTBlock:
    """How a vision tower's checkpoint names one encoder block and which of its tensors carry
    biases: the norm before the attention and the one before the MLP (`layer_norm`: LayerNorms
    with a weight and a bias, else RMSNorms with a weight), the attention's input projections
    (q / k / v, or one fused qkv) and its output projection, the MLP's up-side linears (fc1,
    or gate and up) and its down projection; `norms_first`: the norms are created before the
    linears (else after them), the order the engine creates, and so loads, the block's
    parameters. `_Builder.vit_block` lays a block out from it."""

    norms: tuple[str, str]
    layer_norm: bool
    attention: tuple[str, ...]
    attention_bias: bool
    mlp: tuple[str, ...]
    mlp_bias: bool
    norms_first: bool = True


# The encoder blocks of the towers kvplan lays out, each from the model file named
# (vLLM unless said): CLIP / SigLIP / Llama 4 (clip.py, siglip.py, mllama4.py; Mllama's
# without attention biases: mllama.py), LFM2-VL's SigLIP2 (siglip2.py), RADIO (radio.py,
# intern_vit.py InternVisionEncoderLayer), Qwen2-VL / Qwen2.5-VL (qwen2_vl.py, qwen2_5_vl.py),
# Qwen3-VL (qwen3_vl.py), Pixtral (pixtral.py), MoonViT (kimi_k25_vit.py; Kimi-K3's without
# biases and with RMSNorms)
CLIP_BLOCK = ViTBlock(("input_layernorm", "post_attention_layernorm"), True,
                      ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                       "self_attn.o_proj"), True, ("mlp.fc1", "mlp.fc2"), True,
                      norms_first=False)
SIGLIP2_BLOCK = ViTBlock(("layer_norm1", "layer_norm2"), True,
                         ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                          "self_attn.out_proj"), True, ("mlp.fc1", "mlp.fc2"), True)
# RADIO's and Qwen2-VL's: LayerNorms, a fused qkv and proj, fc1 / fc2, all biased
RADIO_BLOCK = ViTBlock(("norm1", "norm2"), True, ("attn.qkv", "attn.proj"), True,
                       ("mlp.fc1", "mlp.fc2"), True)
QWEN2_5_VL_BLOCK = ViTBlock(("norm1", "norm2"), False, ("attn.qkv", "attn.proj"), True,
                            ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"), True)
QWEN3_VL_BLOCK = replace(RADIO_BLOCK, mlp=("mlp.linear_fc1", "mlp.linear_fc2"))
PIXTRAL_BLOCK = ViTBlock(("attention_norm", "ffn_norm"), False,
                         ("attention.q_proj", "attention.k_proj", "attention.v_proj",
                          "attention.o_proj"), False,
                         ("feed_forward.gate_proj", "feed_forward.up_proj",
                          "feed_forward.down_proj"), False)
MOONVIT_BLOCK = ViTBlock(("norm0", "norm1"), True, ("wqkv", "wo"), True,
                         ("mlp.fc0", "mlp.fc1"), True, norms_first=False)


class _Builder:
    def __init__(self, spec: ModelSpec, q: Quantization, tp: int, ep: int,
                 padded_vocab: bool, expert_load: ExpertLoad | None,
                 vocab: VocabSplit | None = None) -> None:
        self.spec, self.q, self.tp, self.ep = spec, q, tp, ep
        self.padded_vocab = padded_vocab
        self.vocab = vocab or VLLM_VOCAB
        self.expert_load = expert_load
        self.md = MODEL_DTYPE_NAMES.get(spec.dtype, "BF16")
        self.out: list[WeightTensor] = []
        self.lay = spec.layout

    # --- primitives ---------------------------------------------------------------------

    def plain(self, name: str, shape: tuple[int, ...], layer: int | None, place: str,
              dtype: str | None = None, count: int = 1) -> None:
        self.out.append(WeightTensor(name, shape, dtype or self.md, layer, place, count))

    def shard(self, n: int, split: bool) -> int:
        if not split or self.tp == 1:
            return n
        if n % self.tp:
            raise BadInputError(f"{self.spec.name}: a dimension of {n} cannot be split over "
                                f"tensor parallelism {self.tp}",
                                "choose a --tp that divides the model's heads and widths")
        return n // self.tp

    def linear(self, name: str, out_f: int, in_f: int, layer: int | None, place: str,
               split: str = "column", bias: bool = False, kind: str = "other",
               count: int = 1, quantizable: bool = True) -> None:
        """A linear layer (out x in); split: column (outputs), row (inputs), replicated."""
        o = self.shard(out_f, split == "column")
        i = self.shard(in_f, split == "row")
        q = self.q
        # the module as the checkpoint's quantization config names it (TensorLayout
        # sublayer_module: Nemotron-H's `layers.N.mixer.q_proj` for kvplan's self_attn.q_proj)
        ck = name
        if self.lay.sublayer_module:
            ck = re.sub(r"\.(self_attn|mlp)\.", f".{self.lay.sublayer_module}.", name, count=1)
        quantize = quantizable and q.quantized and not skipped(ck, kind, q.skip) and (
            q.only is None or kind in q.only)
        if q.per_module is not None:  # a per-layer map (ModelOpt MIXED_PRECISION)
            q = (module_format(q, ck) if quantize else None) or NONE
            quantize = q.quantized
        for k, t in enumerate(linear_tensors(q, o, i, self.spec.dtype, quantized=quantize)):
            self.out.append(WeightTensor(f"{name}.{t.suffix}", t.shape, t.dtype, layer, place,
                                         count, o * i * count if k == 0 else 0))
        if bias:
            self.plain(f"{name}.bias", (o,), layer, place, count=count)

    def tower_tensor(self, name: str, shape: tuple[int, ...]) -> None:
        """A vision or audio tower's tensor, whole on every rank, in the model's dtype."""
        self.plain(name, shape, None, "vision")

    def tower_linear(self, name: str, out_f: int, in_f: int, bias: bool = False) -> None:
        """A tower's linear kept whole on every rank and in the model's dtype (the towers
        vLLM builds with plain or replicated linears, outside the quantized layers)."""
        self.linear(name, out_f, in_f, None, "vision", "replicated", bias, "vision",
                    quantizable=False)

    def vocab_rows(self, vocab: int) -> int:
        """Rows of a vocabulary-parallel table (embedding, LM head) on one rank: the
        checkpoint's `vocab` (split over TP, rounded up, when not padded), or as vLLM builds
        it (`padded_vocab`): `vocab_shard_rows`."""
        if self.padded_vocab:
            return vocab_shard_rows(vocab, self.tp, self.spec.name, self.vocab)
        return cdiv(vocab, self.tp) if self.tp > 1 else vocab

    # --- whole model --------------------------------------------------------------------

    def build(self) -> None:
        s = self.spec
        if self.lay.encoder_decoder == "whisper":
            self.whisper()
            return
        if self.lay.encoder_decoder == "mbart":
            self.mbart()
            return
        if s.shared_blocks is not None:
            self.zamba2()
            return
        hidden, vocab = _need(s, "hidden_size"), _need(s, "vocab_size")
        rows_per_rank = self.vocab_rows(vocab)
        embed_rows = rows_per_rank
        if self.lay.extra_embedding_rows:
            # MllamaTextModel: nn.Embedding(vocab_size + 8, hidden), the LM head vocab_size
            embed_rows = self.vocab_rows(vocab + self.lay.extra_embedding_rows)
        width = self.lay.embed_width or hidden
        self.plain("model.embed_tokens.weight", (embed_rows, width), None, "embed")
        if self.lay.learned_positions and s.max_context_tokens:
            self.plain("wpe.weight", (s.max_context_tokens + self.lay.position_offset, hidden),
                       None, "embed")
        if self.lay.embed_width:  # OPT-350m: project_in / project_out around the layers
            self.linear("model.project_in", hidden, width, None, "embed", "replicated")
            self.linear("model.project_out", width, hidden, None, "final", "replicated")
        if s.per_layer_inputs is not None:
            self.per_layer_inputs(s.per_layer_inputs, hidden)
        for i in range(s.num_layers):
            self.layer(i, f"model.layers.{i}", "layer")
        for k in range(s.num_nextn_predict_layers or 0):
            self.mtp(s.num_layers + k, rows_per_rank)
        if s.per_layer_inputs is not None:
            for k in range(s.per_layer_inputs.altup_inputs - 1):
                self.linear(f"model.altup_unembed_projections.{k}", hidden, hidden, None,
                            "final", kind="other")
        if self.lay.final_norm:
            self.norm("model.norm", hidden, None, "final")
        if s.hyper_connections:  # the head's hyper-connection mix (hc_head_*), fp32
            hc = s.hyper_connections
            self.plain("hc_head_base", (hc,), None, "final", "F32")
            self.plain("hc_head_fn", (hc, hc * hidden), None, "final", "F32")
            self.plain("hc_head_scale", (1,), None, "final", "F32")
        if s.attention_residuals:
            self.plain("model.output_attn_res_norm.weight", (hidden,), None, "final")
            self.plain("model.output_attn_res_proj.weight", (1, hidden), None, "final")
        if not s.tie_word_embeddings:
            head = (module_format(self.q, "lm_head")
                    if self.q.per_module is not None and self.q.method == "modelopt" else None)
            if head is not None and head.quantized:
                # a per-layer map that quantizes the head (vLLM's ModelOptMixedPrecisionConfig
                # gives ParallelLMHead the layer's method): rows already per rank
                self.linear("lm_head", rows_per_rank, hidden, None, "head", "replicated")
            else:
                self.plain("lm_head.weight", (rows_per_rank, width), None, "head")
            if self.lay.lm_head_bias:  # Phi's lm_head = ParallelLMHead(bias=True)
                self.plain("lm_head.bias", (rows_per_rank,), None, "head")
        if s.vision is not None:
            self.vision_tower()
        if s.audio_encoder is not None:
            self.audio_tower()

    def per_layer_inputs(self, pl: PerLayerInputs, hidden: int) -> None:
        """Gemma 3n's model-level tensors beside the embedding (vLLM gemma3n.py
        Gemma3nTextModel): embed_tokens_per_layer (a vocabulary-parallel table of `vocab`
        rows, num_layers x width wide), per_layer_model_projection (hidden -> num_layers x
        width, column-parallel) and its RMSNorm over one width, and altup_inputs - 1
        altup_projections (hidden -> hidden, column-parallel); the as many
        altup_unembed_projections are laid out with the final norm."""
        wide = self.spec.num_layers * pl.width
        self.plain("model.embed_tokens_per_layer.weight", (self.vocab_rows(pl.vocab), wide),
                   None, "embed")
        self.linear("model.per_layer_model_projection", wide, hidden, None, "embed")
        self.plain("model.per_layer_projection_norm.weight", (pl.width,), None, "embed")
        for k in range(pl.altup_inputs - 1):
            self.linear(f"model.altup_projections.{k}", hidden, hidden, None, "embed")

    def per_layer_extras(self, i: int, p: str, place: str, pl: PerLayerInputs) -> None:
        """A Gemma 3n decoder layer's tensors beyond attention, MLP and the sandwich norms
        (vLLM gemma3n.py Gemma3nDecoderLayer): AltUp's correction_coefs (n x n),
        prediction_coefs (n^2 x n), modality_router (n x hidden), router_norm and
        correct_output_scale (hidden), all whole on every rank; LAuReL's linear_left (rank x
        hidden, column-parallel), linear_right (hidden x rank, row-parallel) and
        post_laurel_norm; per_layer_input_gate (width x hidden) and per_layer_projection
        (hidden x width), replicated; post_per_layer_input_norm."""
        hidden, n = _need(self.spec, "hidden_size"), pl.altup_inputs
        for name, out_f, in_f in (("correction_coefs", n, n), ("prediction_coefs", n * n, n),
                                  ("modality_router", n, hidden)):
            self.linear(f"{p}.altup.{name}", out_f, in_f, i, place, "replicated",
                        kind="router", quantizable=False)
        self.plain(f"{p}.altup.router_norm.weight", (hidden,), i, place)
        self.plain(f"{p}.altup.correct_output_scale", (hidden,), i, place)
        self.linear(f"{p}.laurel.linear_left", pl.laurel_rank, hidden, i, place, "column")
        self.linear(f"{p}.laurel.linear_right", hidden, pl.laurel_rank, i, place, "row")
        self.plain(f"{p}.laurel.post_laurel_norm.weight", (hidden,), i, place)
        self.linear(f"{p}.per_layer_input_gate", pl.width, hidden, i, place, "replicated")
        self.linear(f"{p}.per_layer_projection", hidden, pl.width, i, place, "replicated")
        self.plain(f"{p}.post_per_layer_input_norm.weight", (hidden,), i, place)

    def zamba2(self) -> None:
        """Zamba2 (vLLM zamba2.py): the embedding (the LM head always tied to it); per
        decoder layer (each a state entry of spec.layers) an input RMSNorm and the Mamba2
        mixer, a hybrid layer (the state after an attention entry) also a hidden x hidden
        `linear`; the shared blocks once each (Zamba2AttentionDecoderLayer: RMSNorms of 2 x
        hidden and hidden, a multi-head qkv over the 2 x hidden concatenation, o_proj back to
        hidden, a gated MLP, bias per add_bias_linear on the MLP only); per hybrid layer its
        LoRA adapters (A: in x rank, B: rank x out) on gate_up and, with attention adapters,
        on q, k and v; the final norm."""
        s, sb = self.spec, self.spec.shared_blocks
        assert sb is not None
        hidden, vocab = _need(s, "hidden_size"), _need(s, "vocab_size")
        inter = _need(s, "intermediate_size")
        self.plain("model.embed_tokens.weight", (self.vocab_rows(vocab), hidden), None, "embed")
        wide, rank, bias = 2 * hidden, sb.adapter_rank, bool(s.attention_bias)
        hybrids = []
        for i, layer in enumerate(s.layers):
            if not isinstance(layer, RecurrentState):
                continue
            p = f"model.layers.{i}"
            self.norm(f"{p}.mamba_decoder.input_layernorm", hidden, i, "layer")
            self.ssm_mixer(i, f"{p}.mamba_decoder", "layer")
            if i and not isinstance(s.layers[i - 1], RecurrentState):
                hybrids.append(i)
                self.linear(f"{p}.linear", hidden, hidden, i, "layer", "replicated")
        if not hybrids:
            raise BadInputError(f"{s.name}: a Zamba2 spec without hybrid layers")
        for k in range(sb.count):
            at = hybrids[min(k, len(hybrids) - 1)]
            b = f"model.blocks.{k}"
            self.norm(f"{b}.input_layernorm", wide, at, "layer")
            self.norm(f"{b}.pre_ff_layernorm", hidden, at, "layer")
            self.linear(f"{b}.self_attn.qkv_proj", 3 * wide, wide, at, "layer", kind="attn")
            self.linear(f"{b}.self_attn.o_proj", hidden, wide, at, "layer", "row", kind="attn")
            self.linear(f"{b}.feed_forward.gate_up_proj", 2 * inter, hidden, at, "layer",
                        bias=bias, kind="mlp")
            self.linear(f"{b}.feed_forward.down_proj", hidden, inter, at, "layer", "row",
                        bias, "mlp")
        for j, at in enumerate(hybrids):
            a = f"model.adapters.{j}"
            self.linear(f"{a}.gate_up.A", rank, hidden, at, "layer", "replicated")
            self.linear(f"{a}.gate_up.B", 2 * inter, rank, at, "layer")
            if sb.attention_adapters:
                for n in ("q", "k", "v"):
                    self.linear(f"{a}.{n}.A", rank, wide, at, "layer", "replicated")
                    self.linear(f"{a}.{n}.B", wide, rank, at, "layer")
        self.norm("model.final_layernorm", hidden, None, "final")

    def whisper(self) -> None:
        """Whisper as its checkpoint stores it (transformers modeling_whisper.py, vLLM
        whisper.py): the audio encoder (whisper_encoder), placed with the embedding as a
        tower; the decoder's token and position embeddings; per decoder layer a
        self-attention (on the spec's self-attention layer) and a cross-attention
        encoder_attn (on its cross layer) of that shape, each after a LayerNorm, and the MLP;
        a final LayerNorm; proj_out tied to the embedding."""
        s, enc = self.spec, self.spec.audio_encoder
        assert enc is not None
        d, vocab = _need(s, "hidden_size"), _need(s, "vocab_size")
        ffn = _need(s, "intermediate_size")
        self.whisper_encoder("model.encoder", d)
        rows = self.vocab_rows(vocab)
        self.plain("model.decoder.embed_tokens.weight", (rows, d), None, "embed")
        self.plain("model.decoder.embed_positions.weight", (_need(s, "max_context_tokens"), d),
                   None, "embed")
        for k in range(s.num_layers // 2):
            p, i = f"model.decoder.layers.{k}", 2 * k
            self.whisper_ln(f"{p}.self_attn_layer_norm", d, i, "layer")
            self.whisper_attention(f"{p}.self_attn", d, i, "layer")
            self.whisper_ln(f"{p}.encoder_attn_layer_norm", d, i + 1, "layer")
            self.whisper_attention(f"{p}.encoder_attn", d, i + 1, "layer")
            self.whisper_block(p, d, ffn, i, "layer")
        self.whisper_ln("model.decoder.layer_norm", d, None, "final")
        if not s.tie_word_embeddings:
            self.plain("proj_out.weight", (rows, d), None, "head")

    def whisper_ln(self, name: str, d: int, layer: int | None, place: str) -> None:
        self.plain(f"{name}.weight", (d,), layer, place)
        self.plain(f"{name}.bias", (d,), layer, place)

    def whisper_attention(self, p: str, d: int, layer: int | None, place: str) -> None:
        for proj in ("q_proj", "k_proj", "v_proj"):
            self.linear(f"{p}.{proj}", d, d, layer, place, "column", proj != "k_proj", "attn")
        self.linear(f"{p}.out_proj", d, d, layer, place, "row", True, "attn")

    def whisper_block(self, p: str, d: int, width: int, layer: int | None, place: str
                      ) -> None:
        self.whisper_ln(f"{p}.final_layer_norm", d, layer, place)
        self.linear(f"{p}.fc1", width, d, layer, place, "column", True, "mlp")
        self.linear(f"{p}.fc2", d, width, layer, place, "row", True, "mlp")

    def whisper_encoder(self, e: str, d: int) -> None:
        """A Whisper encoder d wide under prefix `e` (transformers modeling_whisper.py
        WhisperEncoder, Qwen2AudioEncoder for Voxtral; vLLM whisper.py WhisperEncoder), place
        "vision" (a tower, on the first pipeline stage): two biased convolutions (the mel
        bins -> d, d -> d, kernel 3), learned positions for max_positions frames, per layer
        a LayerNorm and an attention with biased q / v / out (k without), a LayerNorm and a
        biased fc1 / fc2 of ffn_dim; a final LayerNorm."""
        enc = self.spec.audio_encoder
        assert enc is not None
        for name, inputs in (("conv1", enc.num_mel_bins), ("conv2", d)):
            self.plain(f"{e}.{name}.weight", (d, inputs, 3), None, "vision")
            self.plain(f"{e}.{name}.bias", (d,), None, "vision")
        self.plain(f"{e}.embed_positions.weight", (enc.max_positions, d), None, "vision")
        for k in range(enc.num_layers):
            p = f"{e}.layers.{k}"
            self.whisper_ln(f"{p}.self_attn_layer_norm", d, None, "vision")
            self.whisper_attention(f"{p}.self_attn", d, None, "vision")
            self.whisper_block(p, d, enc.ffn_dim, None, "vision")
        self.whisper_ln(f"{e}.layer_norm", d, None, "vision")

    def audio_tower(self) -> None:
        """A decoder's audio tower (ModelSpec.audio_encoder), place "vision". "voxtral":
        transformers modeling_voxtral.py VoxtralForConditionalGeneration, vLLM voxtral.py
        (VoxtralEncoderModel, AudioLanguageAdapter): the Whisper encoder audio_tower.* and
        multi_modal_projector linear_1 (projector_input_dim -> text) and linear_2 (text ->
        text), no biases, kept whole on every rank. vLLM's encoder also makes a zero bias
        for each k_proj (_create_fake_bias_for_k_proj), which no checkpoint stores: not
        counted. "gemma4": Gemma 4's conformer (gemma4_audio); "gemma3n": Gemma 3n's
        (gemma3n_audio)."""
        enc = self.spec.audio_encoder
        assert enc is not None
        text = _need(self.spec, "hidden_size")
        if enc.kind == "gemma4":
            self.gemma4_audio(enc, text)
            return
        if enc.kind == "gemma3n":
            self.gemma3n_audio(enc, text)
            return
        if enc.kind == "qwen3_omni":
            self.qwen3_omni_audio(enc)
            return
        if enc.kind == "qwen2_5_omni":
            self.qwen2_5_omni_audio(enc)
            return
        assert enc.kind == "voxtral"
        self.whisper_encoder("audio_tower", enc.hidden_size)
        for name, in_f in (("linear_1", enc.projector_input_dim), ("linear_2", text)):
            self.linear(f"multi_modal_projector.{name}", text, in_f, None, "vision",
                        "replicated", False, "vision", quantizable=False)

    def qwen3_omni_audio(self, enc: AudioEncoder) -> None:
        """Qwen3-Omni's audio tower as its checkpoint stores it (thinker.audio_tower.*), place
        "vision": vLLM 0.33.0 qwen3_omni_moe_thinker.py Qwen3OmniMoeAudioEncoder. Three
        biased 3 x 3 Conv2d (1 -> channels, then channels -> channels), conv_out from
        channels x the mel bins after three stride-2 halvings to d (no bias, replicated);
        per layer self_attn_layer_norm, q / k / v (a QKVParallelLinear, all biased) and
        out_proj (row), final_layer_norm, fc1 (column) / fc2 (row), all biased; ln_post;
        proj1 (d -> d) and proj2 (d -> projector_input_dim, the tower's output), biased and
        replicated."""
        pre, d, (c,) = "thinker.audio_tower", enc.hidden_size, enc.conv_channels
        freq = enc.num_mel_bins
        for _ in range(3):
            freq = (freq + 1) // 2  # a 3 x 3 convolution of stride 2, padding 1
        for k, inputs in ((1, 1), (2, c), (3, c)):
            self.tower_tensor(f"{pre}.conv2d{k}.weight", (c, inputs, 3, 3))
            self.tower_tensor(f"{pre}.conv2d{k}.bias", (c,))
        self.tower_linear(f"{pre}.conv_out", d, c * freq)
        for k in range(enc.num_layers):
            p = f"{pre}.layers.{k}"
            self.whisper_ln(f"{p}.self_attn_layer_norm", d, None, "vision")
            for proj in ("q_proj", "k_proj", "v_proj"):
                self.linear(f"{p}.self_attn.{proj}", d, d, None, "vision", "column", True,
                            "attn")
            self.linear(f"{p}.self_attn.out_proj", d, d, None, "vision", "row", True, "attn")
            self.whisper_block(p, d, enc.ffn_dim, None, "vision")
        self.whisper_ln(f"{pre}.ln_post", d, None, "vision")
        self.tower_linear(f"{pre}.proj1", d, d, bias=True)
        self.tower_linear(f"{pre}.proj2", enc.projector_input_dim, d, bias=True)

    def qwen2_5_omni_audio(self, enc: AudioEncoder) -> None:
        """Qwen2.5-Omni's audio tower as its checkpoint stores it (thinker.audio_tower.*),
        place "vision": transformers modeling_qwen2_5_omni.py Qwen2_5OmniAudioEncoder, which
        vLLM 0.33.0 qwen2_5_omni_thinker.py builds unchanged (plain nn.Linear: whole on every
        rank). conv1 (mel bins -> d, kernel 3) and conv2 (d -> d), biased; audio_bos_eos_token
        (2 x projector_input_dim); per layer Whisper's block (q / v / out biased, k without);
        ln_post; proj (d -> projector_input_dim, biased)."""
        pre, d = "thinker.audio_tower", enc.hidden_size
        for name, inputs in (("conv1", enc.num_mel_bins), ("conv2", d)):
            self.tower_tensor(f"{pre}.{name}.weight", (d, inputs, 3))
            self.tower_tensor(f"{pre}.{name}.bias", (d,))
        self.tower_tensor(f"{pre}.audio_bos_eos_token.weight", (2, enc.projector_input_dim))
        for k in range(enc.num_layers):
            p = f"{pre}.layers.{k}"
            self.whisper_ln(f"{p}.self_attn_layer_norm", d, None, "vision")
            for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                self.tower_linear(f"{p}.self_attn.{proj}", d, d, bias=proj != "k_proj")
            self.whisper_ln(f"{p}.final_layer_norm", d, None, "vision")
            self.tower_linear(f"{p}.fc1", enc.ffn_dim, d, bias=True)
            self.tower_linear(f"{p}.fc2", d, enc.ffn_dim, bias=True)
        self.whisper_ln(f"{pre}.ln_post", d, None, "vision")
        self.tower_linear(f"{pre}.proj", enc.projector_input_dim, d, bias=True)

    def gemma4_audio(self, enc: AudioEncoder, text: int) -> None:
        """Gemma 4's audio tower as its checkpoint stores it (model.audio_tower.*,
        model.embed_audio.*), place "vision": transformers modeling_gemma4.py
        Gemma4AudioModel, which vLLM gemma4_mm.py Gemma4ForConditionalGeneration builds with
        AutoModel.from_config and keeps whole on every rank; the subsampling convolutions
        (no biases; LayerNorms without bias) and input_proj_linear ((c0 // 4) x c1 ->
        hidden), per Gemma4AudioLayer two feed-forward halves, the attention with
        relative_k_proj and per_dim_scale (one head wide), the light convolution and three
        norms; output_proj (biased) and embed_audio.embedding_projection (no bias; its norm
        has no weight). Gemma4ClippableLinear stores `.linear.weight` and, with
        use_clipped_linears, four scalar bounds: buffers, counted with no parameters."""
        h, md = enc.hidden_size, self.md
        c0, c1 = enc.conv_channels
        pre = "model.audio_tower"

        whole = self.tower_tensor

        linear = self.tower_linear

        def clippable(name: str, out_f: int, in_f: int) -> None:
            linear(f"{name}.linear", out_f, in_f)
            if enc.clipped_linears:
                for bound in ("input_min", "input_max", "output_min", "output_max"):
                    self.out.append(WeightTensor(f"{name}.{bound}", (), md, None, "vision",
                                                 num_params=0))

        sub = f"{pre}.subsample_conv_projection"
        whole(f"{sub}.layer0.conv.weight", (c0, 1, 3, 3))
        whole(f"{sub}.layer0.norm.weight", (c0,))
        whole(f"{sub}.layer1.conv.weight", (c1, c0, 3, 3))
        whole(f"{sub}.layer1.norm.weight", (c1,))
        linear(f"{sub}.input_proj_linear", h, (c0 // 4) * c1)
        for k in range(enc.num_layers):
            p = f"{pre}.layers.{k}"
            for ff in ("feed_forward1", "feed_forward2"):
                clippable(f"{p}.{ff}.ffw_layer_1", enc.ffn_dim, h)
                clippable(f"{p}.{ff}.ffw_layer_2", h, enc.ffn_dim)
                whole(f"{p}.{ff}.pre_layer_norm.weight", (h,))
                whole(f"{p}.{ff}.post_layer_norm.weight", (h,))
            for proj in ("q_proj", "k_proj", "v_proj", "post"):
                clippable(f"{p}.self_attn.{proj}", h, h)
            linear(f"{p}.self_attn.relative_k_proj", h, h)
            whole(f"{p}.self_attn.per_dim_scale", (h // enc.num_heads,))
            clippable(f"{p}.lconv1d.linear_start", 2 * h, h)
            clippable(f"{p}.lconv1d.linear_end", h, h)
            whole(f"{p}.lconv1d.depthwise_conv1d.weight", (h, 1, enc.conv_kernel))
            whole(f"{p}.lconv1d.pre_layer_norm.weight", (h,))
            whole(f"{p}.lconv1d.conv_norm.weight", (h,))
            for norm in ("norm_pre_attn", "norm_post_attn", "norm_out"):
                whole(f"{p}.{norm}.weight", (h,))
        linear(f"{pre}.output_proj", enc.projector_input_dim, h, bias=True)
        linear("model.embed_audio.embedding_projection", text, enc.projector_input_dim)

    def gemma3n_audio(self, enc: AudioEncoder, text: int) -> None:
        """Gemma 3n's audio tower as its checkpoint stores it (model.audio_tower.*,
        model.embed_audio.*), place "vision": transformers modeling_gemma3n.py
        Gemma3nAudioEncoder, which vLLM gemma3n_mm.py Gemma3nForConditionalGeneration builds
        with AutoModel.from_config, whole on every rank; the subsampling's two 3 x 3,
        stride-2 Conv2d (no bias; the mel bins padded by one each side, so f -> (f - 1) // 2
        + 1 twice) with cumulative group norms and input_proj_linear (f x c1 -> hidden); per
        Gemma3nAudioConformerBlock the feed-forward halves, the attention (q / k / v,
        relative_position_embedding.pos_proj, per_dim_scale, post, two norms), the light
        convolution and the block's norm; no output projection. vLLM gemma3n_mm.py
        Gemma3nMultimodalEmbedder: embedding (a VocabParallelEmbedding of vocab_size rows),
        the hard / soft embedding norms, embedding_projection (row-parallel, no bias); its
        post-projection norm has no weight."""
        h = enc.hidden_size
        c0, c1 = enc.conv_channels
        pre = "model.audio_tower"
        freq = enc.num_mel_bins
        for _ in range(2):
            freq = (freq + 2 - 3) // 2 + 1

        whole = self.tower_tensor

        linear = self.tower_linear

        sub = f"{pre}.subsample_conv_projection"
        whole(f"{sub}.conv_0.conv.weight", (c0, 1, 3, 3))
        whole(f"{sub}.conv_0.norm.weight", (c0,))
        whole(f"{sub}.conv_1.conv.weight", (c1, c0, 3, 3))
        whole(f"{sub}.conv_1.norm.weight", (c1,))
        linear(f"{sub}.input_proj_linear", h, freq * c1)
        for k in range(enc.num_layers):
            p = f"{pre}.conformer.{k}"
            for ff in ("ffw_layer_start", "ffw_layer_end"):
                whole(f"{p}.{ff}.pre_layer_norm.weight", (h,))
                linear(f"{p}.{ff}.ffw_layer_1", enc.ffn_dim, h)
                linear(f"{p}.{ff}.ffw_layer_2", h, enc.ffn_dim)
                whole(f"{p}.{ff}.post_layer_norm.weight", (h,))
            a = f"{p}.attention"
            whole(f"{a}.pre_attn_norm.weight", (h,))
            whole(f"{a}.attn.per_dim_scale", (h // enc.num_heads,))
            linear(f"{a}.attn.relative_position_embedding.pos_proj", h, h)
            for proj in ("q_proj", "k_proj", "v_proj"):
                linear(f"{a}.attn.{proj}", h, h)
            linear(f"{a}.post", h, h)
            whole(f"{a}.post_norm.weight", (h,))
            whole(f"{p}.lconv1d.pre_layer_norm.weight", (h,))
            linear(f"{p}.lconv1d.linear_start", 2 * h, h)
            whole(f"{p}.lconv1d.depthwise_conv1d.weight", (h, 1, enc.conv_kernel))
            whole(f"{p}.lconv1d.conv_norm.weight", (h,))
            linear(f"{p}.lconv1d.linear_end", h, h)
            whole(f"{p}.norm.weight", (h,))
        emb = "model.embed_audio"
        whole(f"{emb}.embedding.weight", (self.vocab_rows(enc.vocab_size), h))
        whole(f"{emb}.hard_embedding_norm.weight", (h,))
        whole(f"{emb}.soft_embedding_norm.weight", (h,))
        self.linear(f"{emb}.embedding_projection", text, h, None, "vision", "row", False,
                    "vision", quantizable=False)

    def mbart(self) -> None:
        """Nemotron Parse's mBART decoder as vLLM builds it (nemotron_parse.py
        MBartDecoderNoPos, nemotron_parse3_5.py): the token embedding (no positions) and its
        LayerNorm; per decoder layer a LayerNorm and a self-attention with biased q / k / v /
        out (k / v of the cache's KV heads: Parse 3.5's self_attention_kv_heads), in Parse
        1.x a LayerNorm and a cross-attention encoder_attn of the same shape (on the spec's
        cross layer), a LayerNorm and fc1 / fc2 with biases; a final LayerNorm; the LM head
        unless tied; the RADIO encoder and neck (vision_tower)."""
        s = self.spec
        d, vocab = _need(s, "hidden_size"), _need(s, "vocab_size")
        ffn, heads = _need(s, "intermediate_size"), _need(s, "num_attention_heads")

        def ln(name: str, layer: int | None, place: str) -> None:
            self.plain(f"{name}.weight", (d,), layer, place)
            self.plain(f"{name}.bias", (d,), layer, place)

        def attention(p: str, i: int) -> None:
            kv = _kv_heads(s, i) * (d // heads)
            for proj, width in (("q_proj", d), ("k_proj", kv), ("v_proj", kv)):
                self.linear(f"{p}.{proj}", width, d, i, "layer", "column", True, "attn")
            self.linear(f"{p}.out_proj", d, d, i, "layer", "row", True, "attn")

        rows = self.vocab_rows(vocab)
        self.plain("decoder.embed_tokens.weight", (rows, d), None, "embed")
        ln("decoder.layernorm_embedding", None, "embed")
        cross = any(isinstance(x, CrossAttention) for x in s.layers)
        step = 2 if cross else 1
        for k in range(s.num_layers // step):
            p, i = f"decoder.layers.{k}", step * k
            ln(f"{p}.self_attn_layer_norm", i, "layer")
            attention(f"{p}.self_attn", i)
            if cross:
                ln(f"{p}.encoder_attn_layer_norm", i + 1, "layer")
                attention(f"{p}.encoder_attn", i + 1)
            ln(f"{p}.final_layer_norm", i, "layer")
            self.linear(f"{p}.fc1", ffn, d, i, "layer", "column", True, "mlp")
            self.linear(f"{p}.fc2", d, ffn, i, "layer", "row", True, "mlp")
        ln("decoder.layer_norm", None, "final")
        if not s.tie_word_embeddings:
            self.plain("lm_head.weight", (rows, d), None, "head")
        self.vision_tower()

    def vit_block(self, p: str, b: ViTBlock, h: int, inter: int, lin: Callable[..., None],
                  attention: int = 0, qkv: int = 0) -> None:
        """One encoder block of a vision tower under prefix `p` (ViTBlock says how it is
        named): the two norms over `h`; the attention's input projections (separate ones
        `attention` wide each, default h, or a fused one `qkv` wide, default three of them)
        column-parallel and its output projection row-parallel; the MLP's up-side linears
        (`inter` wide) column-parallel and its down projection row-parallel. `lin` is the
        tower's linear (kept whole where TP does not divide a width)."""
        attention = attention or h

        def norms() -> None:
            for n in b.norms:
                self.plain(f"{p}.{n}.weight", (h,), None, "vision", self.md)
                if b.layer_norm:
                    self.plain(f"{p}.{n}.bias", (h,), None, "vision", self.md)

        if b.norms_first:
            norms()
        *inputs, out = b.attention
        if len(inputs) == 1:
            lin(f"{p}.{inputs[0]}", qkv or 3 * attention, h, "column", b.attention_bias)
        else:
            for name in inputs:
                lin(f"{p}.{name}", attention, h, "column", b.attention_bias)
        lin(f"{p}.{out}", h, attention, "row", b.attention_bias)
        *ups, down = b.mlp
        for name in ups:
            lin(f"{p}.{name}", inter, h, "column", b.mlp_bias)
        lin(f"{p}.{down}", h, inter, "row", b.mlp_bias)
        if not b.norms_first:
            norms()

    def radio(self, v: VisionTower, text: int, lin: Callable[..., None]) -> None:
        """Nemotron Parse's encoder as vLLM builds it (radio.py RadioModel, the neck of
        nemotron_parse.py RadioWithNeck): the patch embedder (3 x patch^2 -> hidden, no
        bias), a position table of (image_size / patch_size)^2 rows, num_cls_tokens class
        and register tokens; per block (intern_vit.py InternVisionEncoderLayer) LayerNorms
        norm1 / norm2, a fused biased qkv, a biased proj, fc1 / fc2 with biases and the
        layer scales ls1 / ls2; the neck: conv1 (a 1 x 1 Conv1d hidden -> text, biased),
        conv2 (a 1 x 4 Conv2d text -> text, no bias), sum_proj (projector_input_dim ->
        text, biased) and three LayerNorms of the text width."""
        h, inter = v.hidden_size, v.intermediate_size
        pre = "encoder.model_encoder.model"

        whole = self.tower_tensor

        whole(f"{pre}.patch_generator.embedder.weight", (h, 3 * v.patch_size ** 2))
        whole(f"{pre}.patch_generator.pos_embed", (1, (v.image_size // v.patch_size) ** 2, h))
        whole(f"{pre}.patch_generator.cls_token.token", (v.num_cls_tokens, h))
        for k in range(v.num_layers):
            p = f"{pre}.encoder.layers.{k}"
            self.vit_block(p, RADIO_BLOCK, h, inter, lin)
            whole(f"{p}.ls1", (h,))
            whole(f"{p}.ls2", (h,))
        whole("encoder.conv1.weight", (text, h, 1))
        whole("encoder.conv1.bias", (text,))
        whole("encoder.conv2.weight", (text, text, 1, 4))
        lin("encoder.sum_proj", text, v.projector_input_dim, "column", True)
        for k in (1, 2, 3):
            whole(f"encoder.layer_norm{k}.weight", (text,))
            whole(f"encoder.layer_norm{k}.bias", (text,))

    def vision_tower(self) -> None:
        """The vision encoder and projector of a multimodal checkpoint (ModelSpec.vision),
        place "vision" (the first pipeline stage, with the embedding). Its linear layers stay
        in the model dtype (quantized releases leave the tower out: ignore /
        modules_to_not_convert); with TP the encoder's attention and MLP are split as vLLM's
        ViTs do (q/k/v and fc1 column, o and fc2 row) where the widths divide, else whole.
        Shapes: transformers modeling_clip.py (LLaVA), modeling_siglip.py + Gemma3's
        multi_modal_projector, modeling_llama4.py Llama4VisionModel, modeling_mllama.py
        MllamaVisionModel."""
        s, v = self.spec, self.spec.vision
        assert v is not None
        text = _need(s, "hidden_size")
        h, inter, md = v.hidden_size, v.intermediate_size, self.md
        pre = "vision_tower.vision_model" if v.kind in ("clip", "siglip") else "vision_model"
        patches = (v.image_size // v.patch_size) ** 2
        cls = v.kind in ("clip", "llama4", "mllama")  # a class token (SigLIP has none)

        def whole(name: str, shape: tuple[int, ...]) -> None:
            self.plain(f"{pre}.{name}", shape, None, "vision", md)

        def lin(name: str, out_f: int, in_f: int, split: str, bias: bool) -> None:
            if self.tp > 1 and (out_f if split == "column" else in_f) % self.tp:
                split = "replicated"  # a width TP does not divide: kept whole
            self.linear(name, out_f, in_f, None, "vision", split, bias, "vision",
                        quantizable=False)

        def encoder(prefix: str, n: int, qkv_bias: bool, gated: bool) -> None:
            block = replace(CLIP_BLOCK, attention_bias=qkv_bias)
            for k in range(n):
                p = f"{pre}.{prefix}.{k}"
                self.vit_block(p, block, h, inter, lin)
                if gated:
                    self.plain(f"{p}.gate_attn", (1,), None, "vision", md)
                    self.plain(f"{p}.gate_ffn", (1,), None, "vision", md)

        if v.kind in ("moonvit", "kimi_k25"):
            self.moonvit(v, text, lin)
            return
        if v.kind == "radio":
            self.radio(v, text, lin)
            return
        if v.kind in ("qwen2_vl", "qwen2_5_vl", "exaone4_5", "qwen2_5_omni"):
            self.qwen2_vit(v, text, lin)
            return
        if v.kind == "gemma4":
            self.gemma4_vision(v, text, lin)
            return
        if v.kind in ("qwen3_vl", "qwen3_omni"):
            self.qwen3_vit(v, lin)
            return
        if v.kind == "pixtral":
            self.pixtral(v, text, lin)
            return
        if v.kind == "siglip2":
            self.lfm2_vl_siglip2(v, text, lin)
            return
        patch_in = v.num_channels * v.patch_size * v.patch_size
        if v.kind == "llama4":  # Llama4UnfoldConvolution: a linear over unfolded patches
            whole("patch_embedding.linear.weight", (h, patch_in))
        else:
            whole("patch_embedding.weight", (h, v.num_channels, v.patch_size, v.patch_size))
            if v.kind == "siglip":
                whole("patch_embedding.bias", (h,))
        if cls:
            whole("class_embedding", (h,))
        positions = patches + (1 if cls else 0)
        if v.kind == "mllama":
            # gated position embedding with a per-aspect-ratio tile embedding, and the pre /
            # post tile embeddings (one row per aspect ratio id, 0 included), each gated
            tiles, ids = v.max_num_tiles, v.num_aspect_ratios + 1
            whole("gated_positional_embedding.embedding", (positions, h))
            whole("gated_positional_embedding.gate", (1,))
            whole("gated_positional_embedding.tile_embedding.weight",
                  (ids, tiles * positions * h))
            for t in ("pre_tile_positional_embedding", "post_tile_positional_embedding"):
                whole(f"{t}.embedding.weight", (ids, tiles * h))
                whole(f"{t}.gate", (1,))
        else:
            whole("position_embedding.weight", (positions, h))
        if v.kind != "siglip":  # pre-encoder LayerNorm (CLIP pre_layrnorm, layernorm_pre)
            whole("layernorm_pre.weight", (h,))
            whole("layernorm_pre.bias", (h,))
        whole("layernorm_post.weight", (h,))
        whole("layernorm_post.bias", (h,))
        # Mllama's vision attention has no biases; CLIP, SigLIP and Llama 4's have
        encoder("encoder.layers", v.num_layers, v.kind != "mllama", False)
        if v.kind == "mllama":
            encoder("global_transformer.layers", v.num_global_layers, False, True)
        if v.kind == "clip":  # LlavaMultiModalProjector: vision -> text -> text, with biases
            lin("multi_modal_projector.linear_1", text, h, "column", True)
            lin("multi_modal_projector.linear_2", text, text, "row", True)
        elif v.kind == "siglip":  # Gemma3MultiModalProjector: one matrix + an RMSNorm
            self.plain("multi_modal_projector.mm_input_projection_weight", (h, text), None,
                       "vision", md)
            self.plain("multi_modal_projector.mm_soft_emb_norm.weight", (h,), None, "vision",
                       md)
        elif v.kind == "llama4":
            # Llama4VisionPixelShuffleMLP: the pixel shuffle folds 4 patches into one
            # (intermediate_size wide), fc1 -> projector_input_dim, fc2 -> output; no biases
            lin(f"{pre}.vision_adapter.mlp.fc1", v.projector_input_dim, inter, "column", False)
            lin(f"{pre}.vision_adapter.mlp.fc2", v.projector_output_dim, v.projector_input_dim,
                "row", False)
            lin("multi_modal_projector.linear_1", text, v.output_dim, "column", False)
        else:  # mllama: ColumnParallelLinear(vision_output_dim, hidden, bias=True)
            lin("multi_modal_projector", text, v.output_dim, "column", True)

    def norm(self, name: str, width: int, layer: int | None, place: str) -> None:
        self.plain(f"{name}.weight", (width,), layer, place)
        if self.lay.norm_bias:  # LayerNorm with a bias
            self.plain(f"{name}.bias", (width,), layer, place)

    def layer(self, i: int, p: str, place: str) -> None:
        s, norms = self.spec, self.lay.norms
        hidden = _need(s, "hidden_size")
        layer = s.layers[i] if i < s.num_layers else s.layers[-1]
        if s.blocks is not None or s.ssm is not None:
            self.block_layer(i, p, place, self.block(i))
            return
        if self.lay.compressed_blocks:
            self.v4_layer(i, p, place)
            return
        if isinstance(layer, RecurrentState):
            raise BadInputError(f"{s.name}: layer {i} is a recurrent mixer; the weight "
                                "inventory does not model it")
        # norms around attention and MLP
        names: tuple[str, ...]
        if norms == "post":
            names = ("post_attention_layernorm", "post_feedforward_layernorm")
        elif norms == "sandwich":
            names = ("input_layernorm", "post_attention_layernorm",
                     "pre_feedforward_layernorm", "post_feedforward_layernorm")
        elif norms == "dual":
            names = ("input_layernorm", "post_attention_layernorm",
                     "pre_mlp_layernorm", "post_mlp_layernorm")
        elif norms == "parallel":
            names = ("input_layernorm",)  # one norm before the parallel attention + MLP
        else:
            names = ("input_layernorm", "post_attention_layernorm")
        for n in names:
            self.norm(f"{p}.{n}", hidden, i, place)
        if isinstance(layer, MLA):
            self.mla(i, p, place, layer)
        else:
            self.attention(i, p, place)
        self.mlp(i, p, place)
        if s.per_layer_inputs is not None:
            self.per_layer_extras(i, p, place, s.per_layer_inputs)
        if self.lay.layer_scalar:
            self.plain(f"{p}.layer_scalar", (1,), i, place)

    def v4_layer(self, i: int, p: str, place: str) -> None:
        """A DeepSeek-V4 layer as its checkpoint stores it: attn_norm / ffn_norm, the
        hyper-connection mixes of both sub-layers (fp32), compressed attention and the MoE.
        The MTP layer (i past the last layer) uses the window-only attention its
        compress_ratios entry gives (0)."""
        s = self.spec
        hidden = _need(s, "hidden_size")
        self.norm(f"{p}.attn_norm", hidden, i, place)
        self.norm(f"{p}.ffn_norm", hidden, i, place)
        hc = s.hyper_connections or 0
        if hc:
            mix = (2 + hc) * hc  # pre, post and the hc x hc residual mix
            for n in ("attn", "ffn"):
                self.plain(f"{p}.hc_{n}_base", (mix,), i, place, "F32")
                self.plain(f"{p}.hc_{n}_fn", (mix, hc * hidden), i, place, "F32")
                self.plain(f"{p}.hc_{n}_scale", (3,), i, place, "F32")
        if i < s.num_layers:
            layer = s.layers[i]
        else:
            # the window-only attention, as a layer of the model has it or, where every
            # layer compresses (DeepSeek-V4-Pro: 4 / 128 throughout), shaped like the first
            first = s.layers[0]
            layer = next((x for x in s.layers
                          if isinstance(x, CompressedAttention) and x.compress_ratio <= 1),
                         replace(first, compress_ratio=0, index_head_dim=None)
                         if isinstance(first, CompressedAttention) else first)
        if not isinstance(layer, CompressedAttention):
            raise BadInputError(f"{s.name}: layer {i} is not compressed attention")
        self.v4_attention(i, p, place, layer)
        self.moe(i, p, place)

    def v4_attention(self, i: int, p: str, place: str, layer: CompressedAttention) -> None:
        """DeepSeek-V4 attention: low-rank queries (wq_a, q_norm, wq_b), one shared K=V head
        (wkv, kv_norm), per-head attention sinks (fp32), a grouped low-rank output (wo_a:
        o_groups x o_lora_rank from each group's heads, wo_b back to hidden); a compressor
        where compress_ratio > 1 (wkv / wgate in the model dtype, a learned position table
        `ape` in fp32, ratio 4 overlapping two windows, so twice the width) and, on the
        ratio-4 layers, the indexer (its own compressor, weights_proj, wq_b)."""
        s = self.spec
        hidden, heads = _need(s, "hidden_size"), _need(s, "num_attention_heads")
        q_rank, hd = _need(s, "q_lora_rank"), layer.head_dim
        groups, o_rank = _need(s, "o_groups"), _need(s, "o_lora_rank")
        a = f"{p}.attn"
        self.plain(f"{a}.attn_sink", (heads,), i, place, "F32")
        self.linear(f"{a}.wq_a", q_rank, hidden, i, place, "replicated", kind="attn")
        self.plain(f"{a}.q_norm.weight", (q_rank,), i, place)
        self.linear(f"{a}.wq_b", heads * hd, q_rank, i, place, "column", kind="attn")
        self.linear(f"{a}.wkv", hd, hidden, i, place, "replicated", kind="attn")
        self.plain(f"{a}.kv_norm.weight", (hd,), i, place)
        self.linear(f"{a}.wo_a", groups * o_rank, heads * hd // groups, i, place, "column",
                    kind="attn")
        self.linear(f"{a}.wo_b", hidden, groups * o_rank, i, place, "row", kind="attn")
        ratio = layer.compress_ratio
        if ratio <= 1:
            return

        def compressor(c: str, width: int, norm: int) -> None:
            self.plain(f"{c}.ape", (ratio, width), i, place, "F32")
            for n in ("wkv", "wgate"):
                self.linear(f"{c}.{n}", width, hidden, i, place, "replicated", kind="attn",
                            quantizable=False)
            self.plain(f"{c}.norm.weight", (norm,), i, place)

        overlap = 2 if ratio == 4 else 1
        compressor(f"{a}.compressor", overlap * hd, hd)
        if layer.index_head_dim:
            d, n = layer.index_head_dim, _need(s, "index_n_heads")
            compressor(f"{a}.indexer.compressor", overlap * d, d)
            self.linear(f"{a}.indexer.weights_proj", n, hidden, i, place, "replicated",
                        kind="router", quantizable=False)
            self.linear(f"{a}.indexer.wq_b", n * d, q_rank, i, place, "replicated",
                        kind="attn")

    def block(self, i: int) -> Block:
        """Layer i's sub-layers: ModelSpec.blocks, else its cache kind's mixer (a state layer:
        the model's SSM) and an MLP or MoE."""
        s = self.spec
        if s.blocks is not None and i < len(s.blocks):
            return s.blocks[i]
        layer = s.layers[i] if i < s.num_layers else s.layers[-1]
        moe = s.is_moe_layer(i) if i < s.num_layers else s.is_moe
        return Block("ssm" if isinstance(layer, RecurrentState) else "attention",
                     "moe" if moe else "mlp")

    def block_layer(self, i: int, p: str, place: str, block: Block) -> None:
        """A layer of a hybrid or per-layer-block model: one pre-norm per sub-layer
        (Nemotron-H's single sub-layer: `norm`; Jamba, Qwen3-Next, Nemotron-NAS:
        input_layernorm before the mixer, post_attention_layernorm / pre_ff_layernorm before
        the feed-forward), then the mixer and the feed-forward."""
        s = self.spec
        hidden = _need(s, "hidden_size")
        if self.lay.norms == "single":
            self.norm(f"{p}.norm", hidden, i, place)
        else:
            if block.mixer and block.mixer != "parallel_ssm":
                self.norm(f"{p}.input_layernorm", hidden, i, place)
            if block.ffn:
                self.norm(f"{p}.post_attention_layernorm", hidden, i, place)
        if s.attention_residuals:
            # Kimi-K3's attention residuals: a norm and a 1 x hidden projection before the
            # mixer and before the MLP (replicated)
            for n in ("self_attention_res", "mlp_res"):
                self.plain(f"{p}.{n}_norm.weight", (hidden,), i, place)
                self.plain(f"{p}.{n}_proj.weight", (1, hidden), i, place)
        layer = s.layers[i] if i < s.num_layers else s.layers[-1]
        if block.mixer == "attention":
            if isinstance(layer, MLA):
                self.mla(i, p, place, layer)
            else:
                self.attention(i, p, place)
        elif block.mixer in ("ssm", "parallel_ssm"):
            self.ssm_mixer(i, p, place)
        elif block.mixer == "linear":  # Nemotron-NAS replace_with_linear
            self.linear(f"{p}.self_attn.linear_attn", hidden, hidden, i, place, "row",
                        kind="attn")
        if block.ffn == "mlp+moe":  # Gemma 4: the dense MLP and the experts side by side
            self.dense_mlp(i, p, place, block.ffn_width or _need(s, "intermediate_size"))
            self.moe(i, p, place)
        elif block.ffn == "moe":
            self.moe(i, p, place)
        elif block.ffn == "mlp":
            self.dense_mlp(i, p, place, block.ffn_width or _need(s, "intermediate_size"))
        elif block.ffn == "linear":
            self.linear(f"{p}.mlp.linear_mlp", hidden, hidden, i, place, "row", kind="mlp")

    def moonvit(self, v: VisionTower, text: int, lin: Callable[..., None]) -> None:
        """MoonViT as its checkpoint stores it (vision_tower.*, mm_projector.*; vLLM
        kimi_k25_vit.py MoonViT3dPretrainedModel): the patch convolution, a learned position
        grid, per block a fused wqkv (3 x attention_size), wo, norms norm0 / norm1 and a
        two-layer MLP fc0 / fc1, a final norm; then the patch merger (KimiK25MultiModalProjector,
        which Kimi-K3's model builds too), its proj.0 (merged patches -> projector_input_dim)
        and proj.2 (-> text) ReplicatedLinears, whole on every rank. Kimi-K3 ("moonvit"):
        RMSNorms, no biases, the merger's post_norm (RMSNorm of the text width) after the
        linears. Kimi-K2.5 ("kimi_k25"): LayerNorms and every linear biased, the merger's
        pre_norm (a LayerNorm of the tower's width) before them."""
        h, grid = v.hidden_size, v.image_size // v.patch_size
        attn, k25 = v.attention_size or h, v.kind == "kimi_k25"

        whole = self.tower_tensor

        def norm(name: str, width: int) -> None:
            whole(f"{name}.weight", (width,))
            if k25:  # LayerNorm
                whole(f"{name}.bias", (width,))

        whole("vision_tower.patch_embed.proj.weight",
              (h, v.num_channels, v.patch_size, v.patch_size))
        if k25:
            whole("vision_tower.patch_embed.proj.bias", (h,))
        whole("vision_tower.patch_embed.pos_emb.weight", (grid, grid, h))
        block = MOONVIT_BLOCK if k25 else replace(MOONVIT_BLOCK, layer_norm=False,
                                                   attention_bias=False, mlp_bias=False)
        for k in range(v.num_layers):
            self.vit_block(f"vision_tower.encoder.blocks.{k}", block, h, v.intermediate_size,
                           lin, attention=attn)
        norm("vision_tower.encoder.final_layernorm", h)
        m = v.projector_input_dim
        if k25:
            norm("mm_projector.pre_norm", h)
        lin("mm_projector.proj.0", m, m, "replicated", k25)
        lin("mm_projector.proj.2", text, m, "replicated", k25)
        if not k25:
            whole("mm_projector.post_norm.weight", (text,))

    def gemma4_vision(self, v: VisionTower, text: int, lin: Callable[..., None]) -> None:
        """Gemma 4's vision encoder as its checkpoint stores it (model.vision_tower.*,
        model.embed_vision.*; transformers modeling_gemma4.py Gemma4VisionModel, built by
        vLLM gemma4_mm.py Gemma4ForConditionalGeneration through AutoModel.from_config and
        kept whole on every rank): Gemma4VisionPatchEmbedder's input_proj (3 x patch^2 ->
        hidden, no bias) and position_embedding_table (2 x position_table_size x hidden);
        per layer Gemma4ClippableLinear q / k / v / o (`.linear`, no biases), the q / k
        RMSNorms over one head (v_norm has no weight), four RMSNorms and the gated MLP;
        std_bias / std_scale when `standardize`; Gemma4MultimodalEmbedder's
        embedding_projection (hidden -> text, no bias; its RMSNorm has no weight)."""
        h, inter = v.hidden_size, v.intermediate_size
        q, kv = v.num_heads * v.head_dim, v.num_kv_heads * v.head_dim
        pre = "model.vision_tower"

        whole = self.tower_tensor

        linear = self.tower_linear

        linear(f"{pre}.patch_embedder.input_proj", h, v.num_channels * v.patch_size ** 2)
        whole(f"{pre}.patch_embedder.position_embedding_table", (2, v.position_table_size, h))
        for k in range(v.num_layers):
            p = f"{pre}.encoder.layers.{k}"
            for proj, out_f in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
                linear(f"{p}.self_attn.{proj}.linear", out_f, h)
            linear(f"{p}.self_attn.o_proj.linear", h, q)
            whole(f"{p}.self_attn.q_norm.weight", (v.head_dim,))
            whole(f"{p}.self_attn.k_norm.weight", (v.head_dim,))
            for proj in ("gate_proj", "up_proj"):
                linear(f"{p}.mlp.{proj}.linear", inter, h)
            linear(f"{p}.mlp.down_proj.linear", h, inter)
            for norm in ("input_layernorm", "post_attention_layernorm",
                         "pre_feedforward_layernorm", "post_feedforward_layernorm"):
                whole(f"{p}.{norm}.weight", (h,))
        if v.standardize:
            whole(f"{pre}.std_bias", (h,))
            whole(f"{pre}.std_scale", (h,))
        linear("model.embed_vision.embedding_projection", text, h)

    def lfm2_vl_siglip2(self, v: VisionTower, text: int, lin: Callable[..., None]) -> None:
        """LFM2-VL's SigLIP2 NaFlex encoder as its checkpoint stores it
        (model.vision_tower.vision_model.*, model.multi_modal_projector.*; vLLM lfm2_vl.py,
        siglip2.py): embeddings.patch_embedding (3 x patch^2 -> hidden, biased) and
        position_embedding (position_table_size x hidden); per layer LayerNorms
        layer_norm1 / layer_norm2, q / k / v / out_proj and mlp fc1 / fc2, all biased; the
        post LayerNorm; the projector's linear_1 (projector_input_dim ->
        projector_output_dim) and linear_2 (-> text), biased, whole on every rank
        (ReplicatedLinear)."""
        h, inter = v.hidden_size, v.intermediate_size
        pre, proj = "model.vision_tower.vision_model", "model.multi_modal_projector"

        whole = self.tower_tensor

        lin(f"{pre}.embeddings.patch_embedding", h, v.num_channels * v.patch_size ** 2,
            "replicated", True)
        whole(f"{pre}.embeddings.position_embedding.weight", (v.position_table_size, h))
        for k in range(v.num_layers):
            self.vit_block(f"{pre}.encoder.layers.{k}", SIGLIP2_BLOCK, h, inter, lin)
        whole(f"{pre}.post_layernorm.weight", (h,))
        whole(f"{pre}.post_layernorm.bias", (h,))
        lin(f"{proj}.linear_1", v.projector_output_dim, v.projector_input_dim, "replicated",
            True)
        lin(f"{proj}.linear_2", text, v.projector_output_dim, "replicated", True)

    def pixtral(self, v: VisionTower, text: int, lin: Callable[..., None]) -> None:
        """Mistral 3's Pixtral encoder as its checkpoint stores it (model.vision_tower.*,
        model.multi_modal_projector.*; vLLM mistral3.py, pixtral.py PixtralHFVisionModel):
        patch_conv (no bias), ln_pre; per layer attention_norm, q / k / v / o, ffn_norm and
        gate / up / down, no biases; the projector's RMSNorm, patch_merger.merging_layer
        (projector_input_dim -> hidden) and linear_1 / linear_2 into the text width."""
        h, inter = v.hidden_size, v.intermediate_size
        pre, proj = "model.vision_tower", "model.multi_modal_projector"

        whole = self.tower_tensor

        whole(f"{pre}.patch_conv.weight", (h, v.num_channels, v.patch_size, v.patch_size))
        whole(f"{pre}.ln_pre.weight", (h,))
        for k in range(v.num_layers):
            self.vit_block(f"{pre}.transformer.layers.{k}", PIXTRAL_BLOCK, h, inter, lin)
        whole(f"{proj}.norm.weight", (h,))
        lin(f"{proj}.patch_merger.merging_layer", h, v.projector_input_dim, "replicated",
            False)
        lin(f"{proj}.linear_1", text, h, "column", False)
        lin(f"{proj}.linear_2", text, text, "row", False)

    def qwen3_vit(self, v: VisionTower, lin: Callable[..., None]) -> None:
        """Qwen3-VL's (and Qwen3.5's) vision encoder as its checkpoint stores it
        (model.visual.*; vLLM qwen3_vl.py Qwen3_VisionTransformer): Qwen3_VisionPatchEmbed's
        Conv3d with a bias, pos_embed (position_table_size x hidden), per Qwen3_VisionBlock
        LayerNorms norm1 / norm2, a fused qkv and proj, mlp.linear_fc1 / linear_fc2 (all
        biased); Qwen3_VisionPatchMerger `merger` (a LayerNorm of hidden, linear_fc1
        projector_input_dim -> itself, linear_fc2 -> output_dim, biased) and num_deepstack
        more in deepstack_merger_list, each normed after the merge (projector_input_dim).
        "qwen3_omni": Qwen3-Omni's thinker.visual.* (vLLM 0.33.0 qwen3_omni_moe_thinker.py
        Qwen3Omni_VisionTransformer), the same shapes with the mergers' norm named ln_q, their
        linears mlp.0 / mlp.2, and the deepstack mergers merger_list."""
        h, m, md = v.hidden_size, v.projector_input_dim, self.md
        omni = v.kind == "qwen3_omni"
        pre = "thinker.visual" if omni else "model.visual"
        norm, fc1, fc2 = ("ln_q", "mlp.0", "mlp.2") if omni else ("norm", "linear_fc1",
                                                                  "linear_fc2")
        deepstack = "merger_list" if omni else "deepstack_merger_list"

        def whole(name: str, shape: tuple[int, ...]) -> None:
            self.plain(f"{pre}.{name}", shape, None, "vision", md)

        whole("patch_embed.proj.weight",
              (h, v.num_channels, v.temporal_patch_size, v.patch_size, v.patch_size))
        whole("patch_embed.proj.bias", (h,))
        whole("pos_embed.weight", (v.position_table_size, h))
        for k in range(v.num_layers):
            self.vit_block(f"{pre}.blocks.{k}", QWEN3_VL_BLOCK, h, v.intermediate_size, lin)
        mergers = [("merger", h)] + [(f"{deepstack}.{k}", m) for k in range(v.num_deepstack)]
        for name, width in mergers:
            whole(f"{name}.{norm}.weight", (width,))
            whole(f"{name}.{norm}.bias", (width,))
            lin(f"{pre}.{name}.{fc1}", m, m, "column", True)
            lin(f"{pre}.{name}.{fc2}", v.output_dim, m, "row", True)

    def qwen2_vit(self, v: VisionTower, text: int, lin: Callable[..., None]) -> None:
        """Qwen2-VL's and Qwen2.5-VL's vision encoders as their checkpoints store them
        (visual.*; transformers modeling_qwen2_vl.py / modeling_qwen2_5_vl.py, vLLM
        qwen2_vl.py / qwen2_5_vl.py): the Conv3d patch embedding (no bias), per block two
        norms, the fused qkv and proj, the MLP (all linears with biases); the merger's norm
        ln_q and its two linears (with biases). Qwen2-VL: LayerNorms (weight and bias) and
        fc1 / fc2; Qwen2.5-VL: RMSNorms and a gated gate / up / down MLP; EXAONE 4.5
        (vLLM exaone4_5.py): Qwen2.5-VL's with num_kv_heads K/V heads in the qkv;
        Qwen2.5-Omni (vLLM qwen2_5_omni_thinker.py): Qwen2.5-VL's under thinker.visual."""
        h = v.hidden_size
        rms = v.kind in ("qwen2_5_vl", "exaone4_5", "qwen2_5_omni")
        qkv = (v.num_heads + 2 * v.num_kv_heads) * v.head_dim if v.num_kv_heads else 3 * h
        pre = "thinker.visual" if v.kind == "qwen2_5_omni" else "visual"

        whole = self.tower_tensor

        whole(f"{pre}.patch_embed.proj.weight",
              (h, v.num_channels, v.temporal_patch_size, v.patch_size, v.patch_size))
        block = QWEN2_5_VL_BLOCK if rms else RADIO_BLOCK
        for k in range(v.num_layers):
            self.vit_block(f"{pre}.blocks.{k}", block, h, v.intermediate_size, lin, qkv=qkv)
        whole(f"{pre}.merger.ln_q.weight", (h,))
        if not rms:
            whole(f"{pre}.merger.ln_q.bias", (h,))
        lin(f"{pre}.merger.mlp.0", v.projector_input_dim, v.projector_input_dim, "column", True)
        lin(f"{pre}.merger.mlp.2", text, v.projector_input_dim, "row", True)

    def ssm_mixer(self, i: int, p: str, place: str) -> None:
        """A recurrent mixer's tensors (ModelSpec.ssm), per rank as vLLM shards them: input
        projections and the depthwise convolution column-parallel (split by channel / head),
        per-head parameters split with their heads, the output projection row-parallel.
        mamba1: transformers JambaMambaMixer / vLLM mamba_mixer.py; mamba2: NemotronHMamba2Mixer
        / vLLM mamba_mixer2.py (B/C groups replicated up to TP when TP does not divide them:
        extra_groups_for_head_shards); gated_deltanet: Qwen3NextGatedDeltaNet / vLLM
        qwen3_next.py."""
        s, m = self.spec, self.spec.ssm
        if m is None:
            raise BadInputError(f"{s.name}: layer {i} is a recurrent mixer whose shapes the "
                                "spec does not give", "import the model from its config.json")
        hidden = _need(s, "hidden_size")
        md, tp = self.md, self.tp
        pre = f"{p}.{self.lay.mixer_module}"
        sh = self.shard

        def local(name: str, out_f: int, in_f: int, bias: bool = False) -> None:
            self.linear(name, out_f, in_f, i, place, "replicated", bias, "mixer")

        if m.kind == "lightning":
            # MiniMax-Text-01's lightning attention: a fused qkv, an output gate, out_proj and
            # an RMSNorm over the heads (self_attn.*)
            a = f"{p}.self_attn"
            inner = sh(m.d_inner, True)
            self.linear(f"{a}.qkv_proj", 3 * inner, hidden, i, place, "replicated",
                        kind="attn")
            self.linear(f"{a}.output_gate", inner, hidden, i, place, "replicated",
                        kind="attn")
            self.linear(f"{a}.out_proj", hidden, inner, i, place, "replicated", kind="attn")
            self.plain(f"{a}.norm.weight", (inner,), i, place, md)
            return
        if m.kind == "short_conv":
            # LFM2's short convolution: in_proj to B, C and x; the depthwise conv; out_proj
            local(f"{pre}.in_proj", 3 * sh(m.d_inner, True), hidden, m.conv_bias)
            self.plain(f"{pre}.conv.weight", (sh(m.d_inner, True), 1, m.d_conv), i, place, md)
            if m.conv_bias:
                self.plain(f"{pre}.conv.bias", (sh(m.d_inner, True),), i, place, md)
            local(f"{pre}.out_proj", hidden, sh(m.d_inner, True), m.conv_bias)
            return
        if m.kind == "mamba1":
            inner = sh(m.d_inner, True)
            local(f"{pre}.in_proj", 2 * inner, hidden, m.proj_bias)
            self.plain(f"{pre}.conv1d.weight", (inner, 1, m.d_conv), i, place, md)
            if m.conv_bias:
                self.plain(f"{pre}.conv1d.bias", (inner,), i, place, md)
            local(f"{pre}.x_proj", m.dt_rank + 2 * m.d_state, inner)
            local(f"{pre}.dt_proj", inner, m.dt_rank, bias=True)
            self.plain(f"{pre}.A_log", (inner, m.d_state), i, place, md)
            self.plain(f"{pre}.D", (inner,), i, place, md)
            local(f"{pre}.out_proj", hidden, inner, m.proj_bias)
            if m.inner_norms:
                for n, w in (("dt_layernorm", m.dt_rank), ("b_layernorm", m.d_state),
                             ("c_layernorm", m.d_state)):
                    self.plain(f"{pre}.{n}.weight", (w,), i, place, md)
            return
        heads = sh(m.num_heads, True)
        inner = sh(m.d_inner, True)
        if m.kind == "mamba2":
            groups = m.n_groups
            if tp > 1 and groups % tp:
                groups = tp  # replicated so that every rank has one (vLLM mamba_mixer2.py)
            groups //= tp
            conv_dim = inner + 2 * groups * m.d_state
            local(f"{pre}.in_proj", inner + conv_dim + heads, hidden, m.proj_bias)
            self.plain(f"{pre}.conv1d.weight", (conv_dim, 1, m.d_conv), i, place, md)
            if m.conv_bias:
                self.plain(f"{pre}.conv1d.bias", (conv_dim,), i, place, md)
            for n in ("dt_bias", "A_log", "D"):
                self.plain(f"{pre}.{n}", (heads,), i, place, md)
            if m.gated_norm:  # the gated RMSNorm (vLLM Mixer2RMSNormGated: no weight without it)
                self.plain(f"{pre}.norm.weight", (inner,), i, place, md)
            local(f"{pre}.out_proj", hidden, inner, m.proj_bias)
            return
        if m.kind == "gated_deltanet":
            key = sh(m.n_groups * m.d_state, True)
            local(f"{pre}.in_proj_qkvz", 2 * key + 2 * inner, hidden)
            local(f"{pre}.in_proj_ba", 2 * heads, hidden)
            conv_dim = 2 * key + inner
            self.plain(f"{pre}.conv1d.weight", (conv_dim, 1, m.d_conv), i, place, md)
            if m.conv_bias:
                self.plain(f"{pre}.conv1d.bias", (conv_dim,), i, place, md)
            for n in ("dt_bias", "A_log"):
                self.plain(f"{pre}.{n}", (heads,), i, place, md)
            # one gated RMSNorm over a value head, shared by the heads: replicated
            self.plain(f"{pre}.norm.weight", (m.d_inner // m.num_heads,), i, place, md)
            local(f"{pre}.out_proj", hidden, inner)
            return
        if m.kind == "kda":
            # Kimi Delta Attention: q / k / v projections, each with a depthwise short
            # convolution; the forget gate's low-rank f_a (replicated) / f_b; beta (b_proj,
            # one per head); A_log; dt_bias per channel (fp32); o_norm over a head's
            # dimension; a full-rank output gate g_proj (else g_a / g_b); o_proj. Two
            # checkpoint layouts, told apart by that gate: vLLM's KimiDeltaAttention
            # (model_executor/layers/kda.py, Kimi-Linear) has only the low-rank gate and one
            # fp32 A_log per head, (1, 1, heads, 1); its checkpoint keeps the convolutions and
            # o_norm in the model dtype, which vLLM holds in fp32 (params_dtype) once loaded.
            # Kimi-K3's KimiK3DeltaAttention (models/kimi_k3/nvidia/kda.py) requires the
            # full-rank gate; its checkpoint stores A_log over a head's dimension and the
            # convolutions and o_norm in fp32.
            hd, k3 = m.d_state, m.full_rank_gate
            conv_dtype = "F32" if k3 or self.padded_vocab else md
            for n in ("q", "k", "v"):
                local(f"{pre}.{n}_proj", inner, hidden)
            for n in ("q", "k", "v"):
                self.plain(f"{pre}.{n}_conv1d.weight", (inner, 1, m.d_conv), i, place,
                           conv_dtype)
            self.linear(f"{pre}.f_a_proj", hd, hidden, i, place, "replicated", kind="mixer")
            local(f"{pre}.f_b_proj", inner, hd)
            local(f"{pre}.b_proj", heads, hidden)
            self.plain(f"{pre}.A_log", (hd,) if k3 else (1, 1, heads, 1), i, place, "F32")
            self.plain(f"{pre}.dt_bias", (inner,), i, place, "F32")
            self.plain(f"{pre}.o_norm.weight", (hd,), i, place, "F32" if k3 else md)
            if m.full_rank_gate:
                local(f"{pre}.g_proj", inner, hidden)
            else:
                self.linear(f"{pre}.g_a_proj", hd, hidden, i, place, "replicated",
                            kind="mixer")
                local(f"{pre}.g_b_proj", inner, hd)
            local(f"{pre}.o_proj", hidden, inner)
            return
        raise BadInputError(f"{s.name}: the weight inventory does not know the {m.kind} mixer")

    def attention(self, i: int, p: str, place: str) -> None:
        s, lay = self.spec, self.lay
        hidden = _need(s, "hidden_size")
        layer = s.layers[i] if i < s.num_layers else s.layers[-1]
        if isinstance(layer, NoCache) and s.kv_shared:
            # a KV-shared layer (Gemma 3n, Gemma 4): its own projections, of the shapes of
            # the layer whose K and V it reuses (ModelSpec.kv_shared)
            layer = s.layers[dict(s.kv_shared).get(i, i)]
        heads = _need(s, "num_attention_heads")
        kv = getattr(layer, "num_kv_heads", heads)
        hd = getattr(layer, "head_dim", hidden // heads)
        vd = getattr(layer, "v_head_dim", None) or hd
        bias = bool(s.attention_bias) or lay.qkv_bias
        o_bias = (bool(s.attention_bias) and lay.o_proj_bias) or lay.dense_bias
        if self.tp > 1 and kv < self.tp:
            # vLLM replicates KV heads when TP exceeds them: each rank holds one
            kv_rank = 1
            kv_total = self.tp
        else:
            kv_rank, kv_total = None, kv
        if lay.fused_qkv:
            fb = lay.fused_qkv_bias
            self.linear(f"{p}.attn.c_attn", 3 * hidden, hidden, i, place, "column", fb, "attn")
            self.linear(f"{p}.attn.c_proj", hidden, hidden, i, place, "row", fb, "attn")
            return
        # Qwen3-Next's gated attention: q_proj also gives the output gate (attn_output_gate,
        # always on in Qwen3NextAttention), twice the query width
        gate = 2 if lay.attention_output_gate else 1
        if s.q_lora_rank:
            # Step3's MFA (vLLM step3_text.py): q_proj to the low rank (replicated, fused with
            # k / v in qkv_proj), inter_norm, wq from the rank to every head
            self.linear(f"{p}.self_attn.q_proj", s.q_lora_rank, hidden, i, place, "replicated",
                        bias, "attn")
            self.plain(f"{p}.self_attn.inter_norm.weight", (s.q_lora_rank,), i, place)
            self.linear(f"{p}.self_attn.wq", heads * hd, s.q_lora_rank, i, place, "column",
                        bias, "attn")
        else:
            self.linear(f"{p}.self_attn.q_proj", gate * heads * hd, hidden, i, place, "column",
                        bias, "attn")
        for name, width in (("k_proj", hd), ("v_proj", vd)):
            if kv_rank is not None:
                self.linear(f"{p}.self_attn.{name}", kv_total * width, hidden, i, place,
                            "column", bias, "attn")
            else:
                self.linear(f"{p}.self_attn.{name}", kv * width, hidden, i, place, "column",
                            bias, "attn")
        self.linear(f"{p}.self_attn.o_proj", hidden, heads * vd, i, place, "row", o_bias, "attn")
        if lay.attention_gate_proj:
            # AFMoE (transformers modeling_afmoe.py AfmoeAttention): the output is multiplied
            # by sigmoid(gate_proj(x)), a bias-free projection as wide as the heads
            self.linear(f"{p}.self_attn.gate_proj", heads * hd, hidden, i, place, "column",
                        False, "attn")
        if lay.cross_attention_gates and isinstance(layer, CrossAttention):
            # MllamaTextCrossAttention: q/k RMSNorms over a head, and the layer's two tanh
            # gates (cross_attn_attn_gate, cross_attn_mlp_gate)
            self.plain(f"{p}.cross_attn.q_norm.weight", (hd,), i, place)
            self.plain(f"{p}.cross_attn.k_norm.weight", (hd,), i, place)
            self.plain(f"{p}.cross_attn_attn_gate", (1,), i, place)
            self.plain(f"{p}.cross_attn_mlp_gate", (1,), i, place)
        if lay.qk_norm == "head":
            self.plain(f"{p}.self_attn.q_norm.weight", (hd,), i, place)
            self.plain(f"{p}.self_attn.k_norm.weight", (hd,), i, place)
        elif lay.qk_norm == "heads":  # one RMSNorm over all heads, split with them
            self.plain(f"{p}.self_attn.q_norm.weight", (self.shard(heads * hd, True),), i, place)
            self.plain(f"{p}.self_attn.k_norm.weight", (self.shard(kv * hd, True),), i, place)
        elif lay.qk_norm == "k_head":  # k_norm weighted, q_norm without a weight
            self.plain(f"{p}.self_attn.k_norm.weight", (hd,), i, place)
        if lay.attention_sinks:  # attention sinks, one per head
            self.plain(f"{p}.self_attn.sinks", (self.shard(heads, True),), i, place)

    def mla(self, i: int, p: str, place: str, layer: MLA) -> None:
        s = self.spec
        hidden, heads = _need(s, "hidden_size"), _need(s, "num_attention_heads")
        nope, vd = _need(s, "qk_nope_head_dim"), _need(s, "mla_v_head_dim")
        rope, rank = layer.qk_rope_head_dim, layer.kv_lora_rank
        a = f"{p}.self_attn"
        if s.q_lora_rank:
            self.linear(f"{a}.q_a_proj", s.q_lora_rank, hidden, i, place, "replicated",
                        kind="attn")
            self.plain(f"{a}.q_a_layernorm.weight", (s.q_lora_rank,), i, place)
            self.linear(f"{a}.q_b_proj", heads * (nope + rope), s.q_lora_rank, i, place,
                        "column", kind="attn")
        else:
            self.linear(f"{a}.q_proj", heads * (nope + rope), hidden, i, place, "column",
                        kind="attn")
        self.linear(f"{a}.kv_a_proj_with_mqa", rank + rope, hidden, i, place, "replicated",
                    kind="attn")
        self.plain(f"{a}.kv_a_layernorm.weight", (rank,), i, place)
        self.linear(f"{a}.kv_b_proj", heads * (nope + vd), rank, i, place, "column", kind="attn")
        self.linear(f"{a}.o_proj", hidden, heads * vd, i, place, "row", kind="attn")
        if s.mla_output_gate:  # Kimi-K3: sigmoid(g_proj(x)) gates the heads' output
            self.linear(f"{a}.g_proj", heads * vd, hidden, i, place, "column", kind="attn")
        if layer.index_head_dim and s.index_n_heads and s.q_lora_rank:
            # DeepSeek sparse attention's indexer (vLLM deepseek_v2.py Indexer): wq_b and wk
            # quantized like the layer, replicated; weights_proj unquantized; k_norm a
            # LayerNorm (weight and bias)
            d, n = layer.index_head_dim, s.index_n_heads
            self.linear(f"{a}.indexer.wq_b", n * d, s.q_lora_rank, i, place, "replicated",
                        kind="attn")
            self.linear(f"{a}.indexer.wk", d, hidden, i, place, "replicated", kind="attn")
            self.plain(f"{a}.indexer.k_norm.weight", (d,), i, place)
            self.plain(f"{a}.indexer.k_norm.bias", (d,), i, place)
            self.linear(f"{a}.indexer.weights_proj", n, hidden, i, place, "replicated",
                        kind="router", quantizable=False)

    def mlp(self, i: int, p: str, place: str) -> None:
        s = self.spec
        if s.is_moe_layer(i) if i < s.num_layers else s.is_moe:
            self.moe(i, p, place)
            return
        self.dense_mlp(i, p, place, _need(s, "intermediate_size"))

    def dense_mlp(self, i: int, p: str, place: str, inter: int) -> None:
        lay = self.lay
        hidden = _need(self.spec, "hidden_size")
        if not lay.gated_mlp:  # up -> act -> down (Nemotron-H relu2, GPT-2, Falcon)
            up, down = lay.mlp_names
            self.linear(f"{p}.mlp.{up}", inter, hidden, i, place, "column", lay.mlp_bias, "mlp")
            self.linear(f"{p}.mlp.{down}", hidden, inter, i, place, "row", lay.mlp_bias, "mlp")
            for name in lay.mlp_act_params:
                self.plain(f"{p}.mlp.act_fn.{name}", (1,), i, place)
            return
        self.linear(f"{p}.mlp.gate_proj", inter, hidden, i, place, "column", kind="mlp")
        self.linear(f"{p}.mlp.up_proj", inter, hidden, i, place, "column", kind="mlp")
        self.linear(f"{p}.mlp.down_proj", hidden, inter, i, place, "row", kind="mlp")

    def moe(self, i: int, p: str, place: str) -> None:
        s, lay = self.spec, self.lay
        hidden, experts = _need(s, "hidden_size"), _need(s, "num_experts")
        width = _need(s, "moe_intermediate_size")
        bias = lay.expert_bias
        m = f"{p}.{lay.mlp_module}"  # the feed-forward module (DeepSeek-V4: ffn)
        router = f"{lay.mlp_module}.{lay.router}"
        # the router is replicated and never quantized (vLLM builds it without quant_config)
        self.linear(f"{p}.{router}", experts, hidden, i, place, "replicated", bias, "router",
                    quantizable=False)
        if s.num_hash_layers and i < s.num_hash_layers:
            # DeepSeek-V4 hash routing: a token id -> top-k experts table, no bias; int64 in
            # the checkpoint, int32 as vLLM holds it unless MegaMoE (models/deepseek_v4/
            # nvidia/model.py hash_indices_dtype)
            self.plain(f"{m}.gate.tid2eid", (_need(s, "vocab_size"),
                                                 _need(s, "num_experts_per_token")),
                       i, place, "I32" if self.padded_vocab else "I64")
        elif s.routing_bias:
            # noaux_tc routing: a per-expert score correction bias, kept in fp32
            self.plain(f"{m}.{lay.routing_bias}", (experts,), i, place, "F32")
        load = self.expert_load or ExpertLoad()
        latent = s.moe_latent_size
        if latent:
            # latent MoE (Kimi-K3 routed_expert_hidden_size): the routed experts work in the
            # latent width between a down and an up projection (the checkpoint keeps both, and
            # the latent norm, in the model dtype), replicated like the router
            self.linear(f"{m}.routed_expert_down_proj", latent, hidden, i, place,
                        "replicated", kind="router", quantizable=False)
            self.linear(f"{m}.routed_expert_up_proj", hidden, latent, i, place,
                        "replicated", kind="router", quantizable=False)
            if s.moe_latent_norm:
                self.plain(f"{m}.routed_expert_norm.weight", (latent,), i, place)
        width_in = latent or hidden
        hid_in = cdiv(width_in, load.hidden_align) * load.hidden_align
        # expert parallelism: whole experts, ceil(E / ep) per rank; else with TP every rank
        # holds each expert's slice of the width
        count = cdiv(experts, self.ep) if self.ep > 1 else experts
        tp_split = self.ep == 1 and self.tp > 1
        if tp_split and width % self.tp:
            raise BadInputError(f"{s.name}: expert width {width} cannot be split over tensor "
                                f"parallelism {self.tp}")
        w_local = width // self.tp if tp_split else width
        w_local = cdiv(w_local, load.width_align) * load.width_align
        ex = f"{m}.experts"
        first = len(self.out)
        saved_tp, saved_q = self.tp, self.q
        self.tp = 1  # shapes below are already per rank
        if s.expert_quantization is not None and self.q == s.quantization:
            # the checkpoint's own format: its experts have theirs (DeepSeek-V4 fp4)
            self.q = s.expert_quantization
        try:
            if lay.gated_mlp:
                self.linear(f"{ex}.gate_proj", w_local, hid_in, i, place, "replicated", bias,
                            "expert", count)
            self.linear(f"{ex}.up_proj", w_local, hid_in, i, place, "replicated", bias,
                        "expert", count)
            self.linear(f"{ex}.down_proj", hid_in, w_local, i, place, "replicated", bias,
                        "expert", count)
        finally:
            self.tp, self.q = saved_tp, saved_q
        if load != ExpertLoad():
            extra = []
            for k in range(first, len(self.out)):
                t = self.out[k]
                if t.name.endswith(".bias") and load.bias_dtype:
                    self.out[k] = replace(t, dtype=load.bias_dtype)
                elif t.num_params == 0 and load.scale_copies > 1:  # a scale tensor
                    extra += [replace(t, name=f"{t.name}.copy{c}")
                              for c in range(1, load.scale_copies)]
            self.out.extend(extra)
        shared = s.shared_expert_intermediate_size or 0
        if shared:
            sh = f"{m}.shared_experts"
            if lay.gated_mlp:
                self.linear(f"{sh}.gate_proj", shared, hidden, i, place, "column", kind="mlp")
            self.linear(f"{sh}.up_proj", shared, hidden, i, place, "column", kind="mlp")
            self.linear(f"{sh}.down_proj", hidden, shared, i, place, "row", kind="mlp")
            if lay.shared_expert_gate:
                self.linear(f"{m}.shared_expert_gate", 1, hidden, i, place, "replicated",
                            kind="router", quantizable=False)

    def mtp(self, i: int, rows: int) -> None:
        """DeepSeek-V3's multi-token-prediction layer: a full decoder layer plus its own
        embedding, two norms, the 2H -> H projection and a shared head (norm + LM head);
        the projection, norms, embedding and head in the model dtype."""
        hidden = _need(self.spec, "hidden_size")
        if self.lay.mtp == "deepseek_v4":
            # DeepSeek-V4's mtp.k: a full layer, the embedding and hidden projections e_proj /
            # h_proj (quantized like the layer) with their norms, its own norm and
            # hyper-connection head; it shares the model's embedding and head
            p = f"mtp.{i - self.spec.num_layers}"
            self.layer(i, p, "mtp")
            self.out[:] = [t if t.layer != i else replace(t, place="mtp") for t in self.out]
            for n in ("e_proj", "h_proj"):
                self.linear(f"{p}.{n}", hidden, hidden, i, "mtp", "replicated", kind="attn")
            for n in ("enorm", "hnorm", "norm"):
                self.plain(f"{p}.{n}.weight", (hidden,), i, "mtp")
            hc = self.spec.hyper_connections or 0
            if hc:
                self.plain(f"{p}.hc_head_base", (hc,), i, "mtp", "F32")
                self.plain(f"{p}.hc_head_fn", (hc, hc * hidden), i, "mtp", "F32")
                self.plain(f"{p}.hc_head_scale", (1,), i, "mtp", "F32")
            return
        if self.lay.mtp == "qwen3_next":
            # Qwen3-Next's mtp.*: fc (2H -> H), two pre-fc norms, one decoder layer (gated
            # attention + MoE) and a final norm; it shares the model's embedding and LM head
            # (vLLM qwen3_next_mtp.py; EXAONE 4.5 and K-EXAONE alike: exaone4_5_mtp.py and
            # exaone_moe_mtp.py load embed_tokens and lm_head from the model's)
            p = f"mtp.layers.{i}"
            self.layer(i, p, "mtp")
            self.out[:] = [t if t.layer != i else replace(t, place="mtp") for t in self.out]
            for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
                self.plain(f"mtp.{n}.weight", (hidden,), i, "mtp")
            self.linear("mtp.fc", hidden, 2 * hidden, i, "mtp", "replicated",
                        quantizable=False)
            return
        p = f"model.layers.{i}"
        self.layer(i, p, "mtp")
        self.out[:] = [t if t.layer != i else replace(t, place="mtp") for t in self.out]
        self.plain(f"{p}.embed_tokens.weight", (rows, hidden), i, "mtp")
        for n in ("enorm", "hnorm", "shared_head.norm"):
            self.plain(f"{p}.{n}.weight", (hidden,), i, "mtp")
        self.linear(f"{p}.eh_proj", hidden, 2 * hidden, i, "mtp", "replicated",
                    quantizable=False)
        self.plain(f"{p}.shared_head.head.weight", (rows, hidden), i, "mtp")


def vocab_shard_rows(vocab: int, tp: int, model: str = "the model",
                     split: VocabSplit = VLLM_VOCAB) -> int:
    """Rows of a vocabulary-parallel embedding or LM head on one TP rank as vLLM builds them
    (vllm/model_executor/layers/vocab_parallel_embedding.py, 0.33.0: VocabParallelEmbedding
    pads the vocabulary to a multiple of 64 with pad_vocab_size(vocab, padding_size=64), then
    num_embeddings_per_partition = divide(padded, tp_size), and divide() asserts "{padded} is
    not divisible by {tp}"). TP is not folded into the padding (no lcm(64, TP)): a TP that
    does not divide the padded vocabulary is refused, as vLLM refuses to start (vllm#31474:
    GLM-4.7's 151,552 at TP 6). SGLang's VocabParallelEmbedding (python/sglang/srt/layers/
    vocab_parallel_embedding.py, adapted from vLLM's) pads and divides the same way on GPUs.
    TP 3, 6 and 12 divide many vocabularies (Llama 3's 128,256, Phi-3's 32,064), not others
    (Qwen's 151,936). Another engine's `split` (TensorRT-LLM: no padding, rows rounded up per
    rank) is applied the same way."""
    padded = cdiv(vocab, split.pad_to) * split.pad_to
    if tp > 1 and padded % tp and not split.exact:
        return cdiv(padded, tp)
    if tp > 1 and padded % tp:
        fits = [t for t in range(2, 17) if padded % t == 0]
        raise BadInputError(
            f"{model}: vLLM and SGLang pad the {vocab:,}-token vocabulary to {padded:,} (a "
            f"multiple of {split.pad_to}) and divide it by tensor parallelism; {padded:,} is "
            f"not divisible by {tp}, so the engine does not start at TP {tp}",
            "use a TP that divides it: " + ", ".join(map(str, fits)))
    return padded // tp


def _need(spec: ModelSpec, name: str) -> int:
    value = getattr(spec, name)
    if value is None:
        raise BadInputError(f"{spec.name}: the weight inventory needs {name}, which the "
                            "model's spec does not give",
                            "import the model from its config.json, or give the weights' size "
                            "(--weights-memory)")
    return value


def supported(spec: ModelSpec) -> str | None:
    """None when the inventory can be computed for this spec tensor by tensor as its
    checkpoint stores them (ModelSpec.layout.known), else why not."""
    if not spec.layout.known:
        return f"the weight inventory does not model the {spec.family or 'unknown'} family"
    if spec.tie_word_embeddings is None:
        return "the spec does not say whether the embeddings are tied"
    return estimable(spec)


def _kv_heads(spec: ModelSpec, i: int) -> int:
    layer = spec.layers[i] if i < spec.num_layers else spec.layers[-1]
    return getattr(layer, "num_kv_heads", 0)


def estimable(spec: ModelSpec) -> str | None:
    """None when the spec gives the shapes a decoder's tensors are computed from, whatever
    its family; else why not. A layout kvplan does not know is laid out as a generic
    decoder (`generic_note` says how), the estimate `plan`, `import` and the front door use
    when nothing better is known."""
    if spec.ssm is None and any(isinstance(x, RecurrentState) for x in spec.layers):
        return "the spec does not give its recurrent mixer's shapes"
    for name in spec.layout.requires:
        if getattr(spec, name) is None:
            return _REQUIRED[name]
    if spec.blocks is not None and len(spec.blocks) != spec.num_layers:
        return "the spec's blocks do not list one entry per layer"
    for name in ("hidden_size", "vocab_size"):
        if getattr(spec, name) is None:
            return f"the spec has no {name}"
    if spec.num_experts_per_token and not spec.num_experts:
        return "the spec gives experts per token but not how many experts there are"
    if spec.num_experts and spec.moe_layer_step is None and spec.blocks is None:
        return "the spec does not say which layers are MoE"
    if spec.num_experts and spec.moe_intermediate_size is None:
        return "the spec does not give the experts' width"
    dense = spec.blocks is None and any(
        not spec.is_moe_layer(i) for i in range(spec.num_layers))
    if dense and spec.intermediate_size is None:
        return "the spec has no intermediate_size"
    if spec.attention_layers and spec.num_attention_heads is None:
        return "the spec has no num_attention_heads"
    if spec.is_mla and (spec.qk_nope_head_dim is None or spec.mla_v_head_dim is None):
        return "the spec does not give the MLA head sizes"
    return None


def unsized_weights(spec: ModelSpec) -> str:
    """What is wrong when nothing sizes a spec's weights (no num_params, no published
    checkpoint, and `estimable` names a shape it lacks): the one wording `plan`, `check`,
    `compute` and the front door give, the missing shape named."""
    why = estimable(spec) or supported(spec) or "nothing else states them"
    return (f"{spec.name or 'the model'} has no parameter count, and its weights cannot be "
            f"counted from its shapes: {why}")


def unsized_weights_hint(weights_option: str, kv_option: str) -> str:
    """What the user can give instead, in the words of the surface asking (flags for `plan`,
    a plan file's keys for `check`): the measured weights, the KV budget itself, or a YAML
    model spec's num_params (docs/model-schema.md)."""
    return (f"give the weights' size ({weights_option}, as the engine logged 'Model loading "
            f"took'), the KV budget itself ({kv_option}), or num_params in a YAML model spec")


def generic_note(spec: ModelSpec) -> str:
    """What an estimate of a layout kvplan does not know (layout.known False) assumes."""
    note = (f"the {spec.family or 'unknown'} family's layers as a generic decoder's (q/k/v/o "
            "or MLA projections, a gated MLP or the routed and shared experts, two norms; "
            "biases only where the config sets attention_bias); its own extra tensors and "
            "any tower other than those kvplan lays out are not counted")
    if spec.tie_word_embeddings is None:
        note += "; tie_word_embeddings is not stated, so the LM head is counted as its own"
    return note


def towers_note(spec: ModelSpec) -> str:
    """What an estimate leaves out of a multimodal config: the towers kvplan does not lay
    out, by name (ModelSpec.uncounted_towers)."""
    many = len(spec.uncounted_towers) > 1
    return (f"not counted: {', '.join(spec.uncounted_towers)}, "
            f"{'towers' if many else 'a tower'} kvplan does not lay out")


def inventory(spec: ModelSpec, q: Quantization = NONE, tp: int = 1, ep: int = 1,
              padded_vocab: bool = False, include_mtp: bool = True,
              expert_load: ExpertLoad | None = None, vocab: VocabSplit | None = None
              ) -> Inventory:
    """_inventory, kept for the last few arguments asked: `plan --find-gpus` tries up to 28
    layouts and each KV dtype a suggestion tries asks again, while the inventory depends
    only on the model, the format and TP (seven values of TP among those 28 layouts).
    A layout kvplan does not know is laid out as a generic decoder (generic_note)."""
    key = (spec, q, tp, ep, padded_vocab, include_mtp, expert_load, vocab)
    try:
        found = _INVENTORIES.get(key)
    except TypeError:  # an unhashable field somewhere in the spec: no cache
        return _inventory(*key)
    if found is None:
        found = _INVENTORIES[key] = _inventory(*key)
        while len(_INVENTORIES) > 16:
            del _INVENTORIES[next(iter(_INVENTORIES))]
    return found


_INVENTORIES: dict[tuple[Any, ...], Inventory] = {}


def _inventory(spec: ModelSpec, q: Quantization, tp: int, ep: int, padded_vocab: bool,
               include_mtp: bool, expert_load: ExpertLoad | None,
               vocab: VocabSplit | None = None) -> Inventory:
    """Every tensor of the checkpoint (tp=1, padded_vocab False) or of one tensor-parallel
    rank as an engine loads it (padded_vocab True). `include_mtp=False` leaves out DeepSeek's
    MTP layers (vLLM loads them only for MTP speculative decoding). `expert_load` holds the
    quantized experts as an engine's MoE kernel does (padding, scale copies); `vocab` the
    engine's vocabulary split (None: vLLM's)."""
    why = supported(spec) and estimable(spec)
    if why is not None:
        raise BadInputError(f"{spec.name}: {why}")
    if include_mtp:
        b = _Builder(spec, q, tp, ep, padded_vocab, expert_load, vocab)
        b.build()
        tensors = b.out
    else:
        b = _Builder(replace(spec, num_nextn_predict_layers=0), q, tp, ep, padded_vocab,
                     expert_load, vocab)
        b.build()
        tensors = b.out
    return Inventory(tuple(tensors), q, tp)


@record
class Placement:
    """Weight bytes on one GPU of each pipeline stage (every TP rank of a stage alike)."""

    stage_bytes: tuple[int, ...]
    inventory: Inventory

    @property
    def max_bytes(self) -> int:
        return max(self.stage_bytes)


def placement(spec: ModelSpec, q: Quantization = NONE, tp: int = 1, pp: int = 1, ep: int = 1,
              include_mtp: bool = False, expert_load: ExpertLoad | None = None,
              vocab: VocabSplit | None = None,
              partition: Sequence[int] | None = None,
              every_stage_ends: bool = False) -> Placement:
    """Bytes per GPU of each pipeline stage as vLLM loads the checkpoint: vocabulary padded to
    64 and split over TP, embedding on the first stage, final norm and LM head on the last
    (a tied head: the last stage keeps its own copy when pp > 1), layers by get_pp_indices
    (`partition`: VLLM_PP_LAYER_PARTITION's layer counts); MTP layers (when loaded) on the
    last stage. `every_stage_ends`: the model class builds the embedding, final norm and LM
    head on every stage (EngineTraits.vllm_pp_every_stage_ends for vLLM)."""
    inv = inventory(spec, q, tp, ep, padded_vocab=True, include_mtp=include_mtp,
                    expert_load=expert_load, vocab=vocab)
    stages = pp_stages(spec.num_layers, pp, partition)
    out = []
    embed = inv.bytes_where("embed")
    vision = inv.bytes_where("vision")
    for k, (a, b) in enumerate(stages):
        part = inv.bytes_where("layer", range(a, b))
        if k == 0:
            part += embed + vision  # the vision tower runs before the first layer
        elif every_stage_ends:
            part += embed
        if every_stage_ends and k < pp - 1:
            part += inv.bytes_where("final") + inv.bytes_where("head")
        if k == pp - 1:
            part += inv.bytes_where("final") + inv.bytes_where("head") + inv.bytes_where("mtp")
            if pp > 1 and spec.tie_word_embeddings and not every_stage_ends:
                part += embed  # the last stage's own copy of the tied matrix
        out.append(part)
    return Placement(tuple(out), inv)


# --- what a deployment loads ----------------------------------------------------------------

# Formats an engine can quantize an unquantized checkpoint into at load (`--weights-dtype`,
# vLLM `--quantization`): the linear layers take the format, embeddings, LM head, norms and
# routers stay in the model dtype.
LOAD_FORMATS: dict[str, Quantization] = {
    "fp8": Quantization("fp8", "fp8", 8, per_tensor=True,
                        description="FP8 e4m3 quantized at load, one fp32 scale per tensor"),
    "int8": Quantization("int8", "int8-ct", 8,
                         description="int8 (W8A8), one scale per output channel"),
    "awq": Quantization("awq", "awq", 4, group_size=128, symmetric=False,
                        description="AWQ int4, group 128: fp16 scale and packed zero per group"),
    "gptq": Quantization("gptq", "gptq", 4, group_size=128, symmetric=False,
                         description="GPTQ int4, group 128: fp16 scale, packed zero, g_idx"),
    "int4": Quantization("int4", "int-packed", 4, group_size=128,
                         description="int4, group 128, one scale per group"),
    "mxfp4": Quantization("mxfp4", "mxfp4", 4, group_size=32,
                          description="MXFP4 on every linear layer (e8m0 scale per 32)"),
    "nvfp4": Quantization("nvfp4", "nvfp4", 4, group_size=16,
                          description="NVFP4 on every linear layer (fp8 scale per 16, fp32 "
                                      "global scales)"),
    # vLLM's in-flight bitsandbytes (`--quantization bitsandbytes` on an unquantized
    # checkpoint) always makes NF4 with double quantization: bitsandbytes_loader.py calls
    # `quantize_4bit(weight, compress_statistics=True, quant_type="nf4")`, blocksize 64
    "bnb-4bit": Quantization("bitsandbytes", "bnb-4bit", 4, group_size=64, double_quant=True,
                             description="bitsandbytes NF4 quantized at load: blocksize 64, "
                                         "double quantization (uint8 absmax per 64, fp32 "
                                         "per 256 absmax)"),
    # LLM.int8 at load (transformers `load_in_8bit`; vLLM quantizes at load to NF4 only)
    "bnb-8bit": Quantization("bitsandbytes", "bnb-8bit", 8,
                             description="bitsandbytes LLM.int8 quantized at load: int8 "
                                         "weights, one fp32 scale per output row"),
}


@record
class WeightPlan:
    """Weight bytes on one GPU of each pipeline stage, the format assumed and why."""

    stage_bytes: tuple[int, ...]
    format: str  # the format, in words
    why: str  # where it came from: the checkpoint's config, a flag, the parameter count
    exact: bool  # computed tensor by tensor (True) or spread from a total (False)

    @property
    def max_bytes(self) -> int:
        return max(self.stage_bytes)


def weight_plan(spec: ModelSpec, weights: str = "auto", tp: int = 1, pp: int = 1, ep: int = 1,
                expert_load: ExpertLoad | None = None, include_mtp: bool = False,
                vocab: VocabSplit | None = None,
                partition: Sequence[int] | None = None,
                every_stage_ends: bool = False) -> WeightPlan | None:
    """Per-stage weight bytes from the tensor inventory, in the checkpoint's own format
    (`weights` "auto") or the one an engine quantizes into at load (`weights` a canonical
    name of LOAD_FORMATS, or bf16/fp16/fp32). A layout kvplan does not know, with
    neither a published checkpoint nor a parameter count is laid out as a generic decoder
    (generic_note, added to `why`). None when neither can be computed for the spec (the
    caller spreads the published total or the parameter count instead)."""
    generic = supported(spec) is not None
    if generic and (spec.checkpoint is not None or spec.num_params
                    or estimable(spec) is not None):
        return None
    target, q, why = load_format(spec, weights)
    plan = placement(target, q, tp, pp, ep, include_mtp=include_mtp,
                     expert_load=expert_load if q.layout == "mxfp4" else None, vocab=vocab,
                     partition=partition, every_stage_ends=every_stage_ends)
    if generic:
        why += f"; {generic_note(spec)}"
    if spec.uncounted_towers:
        why += f"; {towers_note(spec)}"
    fmt = q.description if q.quantized else f"{target.dtype} (unquantized)"
    return WeightPlan(plan.stage_bytes, fmt, why, exact=True)


def load_format(spec: ModelSpec, weights: str = "auto") -> tuple[ModelSpec, Quantization, str]:
    """(the spec in the dtype loaded, the format of its linear layers, why): the checkpoint's
    own format (`weights` "auto"), one an engine quantizes into at load (a LOAD_FORMATS
    name) or a model dtype (bf16/fp16/fp32)."""
    q = spec.quantization
    target = spec
    if weights == "auto":
        if q.quantized:
            why = "the checkpoint's quantization_config" + "".join(
                f"; {w}" for w in q.warnings)
        elif q.warnings:  # a quant_method kvplan does not know: says so, never silently
            why = " ".join(q.warnings)
        else:
            why = f"the checkpoint's dtype ({spec.dtype}; no quantization_config)"
    elif weights in LOAD_FORMATS:
        q, why = LOAD_FORMATS[weights], f"--weights-dtype {weights} (quantized at load)"
    elif weights in MODEL_DTYPE_NAMES:
        q, why = NONE, f"--weights-dtype {weights}"
        target = replace(spec, dtype=weights)
    else:
        raise BadInputError(f"unknown weights format {weights!r}",
                            "valid: auto, bf16, fp16, fp32, " + ", ".join(LOAD_FORMATS))
    return target, q, why
