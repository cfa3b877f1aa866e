"""Tiny GGUF models for the llama.cpp oracle, written with the `gguf` package (llama.cpp's own
writer): random f16 weights, a 300-token SentencePiece-style vocabulary, and for each
architecture kvplan reads from GGUF headers (kvplan.sources.gguf.ARCHITECTURES) the tensors
its llama.cpp loader creates (src/models/<arch>.cpp `load_arch_tensors`) at small width but
with real attention shapes: 4 query heads of 64, 2 KV heads, windows small enough that the
contexts the oracle runs cross them.

Usage: python tests/oracle_llamacpp/make_ggufs.py OUT_DIR
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

N_EMBD = 256
N_HEAD = 4
N_HEAD_KV = 2
HEAD_DIM = 64
N_FF = 128
N_VOCAB = 300


@dataclass(frozen=True)
class Tiny:
    name: str
    arch: str
    layers: int = 4
    window: int | None = None  # attention.sliding_window
    pattern: int | None = None  # attention.sliding_window_pattern (None: the arch default)
    tied: bool = False  # no output.weight (the token embeddings are reused)
    extra: tuple[str, ...] = ()  # per-layer tensors beyond the llama set
    experts: int = 0
    keys: dict = field(default_factory=dict)


MODELS = (
    Tiny("llama", "llama"),
    # Mistral 7B v0.1 as llama.cpp converts it: arch llama with a sliding_window key
    Tiny("llama-swa", "llama", window=256),
    Tiny("mistral3", "mistral3"),
    Tiny("qwen2", "qwen2", extra=("attn_q.bias", "attn_k.bias", "attn_v.bias")),
    Tiny("qwen3", "qwen3", extra=("attn_q_norm", "attn_k_norm")),
    Tiny("qwen3moe", "qwen3moe", extra=("attn_q_norm", "attn_k_norm"), experts=4),
    Tiny("gemma", "gemma", tied=True),
    Tiny("gemma2", "gemma2", tied=True, window=256,
         extra=("post_attention_norm", "post_ffw_norm")),
    Tiny("gemma3", "gemma3", layers=6, tied=True, window=512,
         extra=("attn_q_norm", "attn_k_norm", "post_attention_norm", "post_ffw_norm")),
    # Phi-3 mini's GGUF carries sliding_window 2047, which llama.cpp ignores
    Tiny("phi3", "phi3", window=2047),
)


def _shapes(m: Tiny) -> dict[str, tuple[int, ...]]:
    """numpy shapes (ggml's ne reversed) of every tensor."""
    q, kv = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    out: dict[str, tuple[int, ...]] = {"token_embd.weight": (N_VOCAB, N_EMBD),
                                       "output_norm.weight": (N_EMBD,)}
    if not m.tied:
        out["output.weight"] = (N_VOCAB, N_EMBD)
    for i in range(m.layers):
        b = f"blk.{i}."
        out[b + "attn_norm.weight"] = (N_EMBD,)
        if m.arch == "phi3":
            out[b + "attn_qkv.weight"] = (q + 2 * kv, N_EMBD)
        else:
            out[b + "attn_q.weight"] = (q, N_EMBD)
            out[b + "attn_k.weight"] = (kv, N_EMBD)
            out[b + "attn_v.weight"] = (kv, N_EMBD)
        out[b + "attn_output.weight"] = (N_EMBD, q)
        out[b + "ffn_norm.weight"] = (N_EMBD,)
        if m.experts:
            out[b + "ffn_gate_inp.weight"] = (m.experts, N_EMBD)
            out[b + "ffn_gate_exps.weight"] = (m.experts, N_FF, N_EMBD)
            out[b + "ffn_up_exps.weight"] = (m.experts, N_FF, N_EMBD)
            out[b + "ffn_down_exps.weight"] = (m.experts, N_EMBD, N_FF)
        elif m.arch == "phi3":
            out[b + "ffn_up.weight"] = (2 * N_FF, N_EMBD)
            out[b + "ffn_down.weight"] = (N_EMBD, N_FF)
        else:
            out[b + "ffn_gate.weight"] = (N_FF, N_EMBD)
            out[b + "ffn_up.weight"] = (N_FF, N_EMBD)
            out[b + "ffn_down.weight"] = (N_EMBD, N_FF)
        for name in m.extra:
            if name in ("attn_q_norm", "attn_k_norm"):
                out[b + name + ".weight"] = (HEAD_DIM,)
            elif name == "attn_q.bias":
                out[b + name] = (q,)
            elif name in ("attn_k.bias", "attn_v.bias"):
                out[b + name] = (kv,)
            else:
                out[b + name + ".weight"] = (N_EMBD,)
    return out


def write(m: Tiny, path: Path) -> None:
    import numpy as np
    from gguf import GGUFWriter, TokenType

    w = GGUFWriter(str(path), m.arch)
    # llama-vocab.cpp gives a model named like "phi3" Phi-3's special tokens, which this
    # vocabulary does not have: the name avoids it
    w.add_name("oracle-" + m.name.replace("phi", "p"))
    w.add_block_count(m.layers)
    w.add_context_length(32768)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(1)  # mostly f16
    if m.window is not None:
        w.add_sliding_window(m.window)
    if m.experts:
        w.add_expert_count(m.experts)
        w.add_expert_used_count(2)
        w.add_expert_feed_forward_length(N_FF)
    # a SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens, then plain pieces
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokens += [f"\u2581t{i}" for i in range(N_VOCAB - len(tokens))]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + \
        [TokenType.BYTE] * 256 + [TokenType.NORMAL] * (N_VOCAB - 259)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * N_VOCAB)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    rng = np.random.default_rng(0)
    for name, shape in _shapes(m).items():
        data = rng.standard_normal(shape).astype(np.float32) * 0.02
        if name.endswith("norm.weight"):
            data = np.ones(shape, dtype=np.float32)
        w.add_tensor(name, data.astype(np.float16) if len(shape) > 1 else data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for m in MODELS:
        write(m, out / f"{m.name}.gguf")
    print(f"{len(MODELS)} tiny GGUF models in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
