"""GGUF files read from their header with the gguf package's own reader: small real files are
written here with the package's own writer, with the keys llama.cpp's converter
(convert_hf_to_gguf.py) writes for each model's config.json, and must give the same KV bytes
as that config.json; weights come exactly from the tensor infos."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

from gguf_files import write_gguf  # noqa: E402
from paths import FIXTURES  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from kvplan.cli import app  # noqa: E402
from kvplan.core.dtypes import parse_format  # noqa: E402
from kvplan.core.errors import BadInputError, KvplanError  # noqa: E402
from kvplan.core.sizing import per_token_bytes, request_bytes  # noqa: E402
from kvplan.sources.library import resolve  # noqa: E402

CONFIGS = FIXTURES / "hf-configs"
BF16 = parse_format("bf16")


def _write(path: Path, arch: str, keys: dict, tensors: bool = True) -> Path:
    return write_gguf(path, arch, keys, tensors)


def _config(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


def _dense_keys(c: dict, head_dim: int | None = None) -> dict:
    """What convert_hf_to_gguf.py's TextModel.set_gguf_parameters writes."""
    return {"general.name": c.get("_name_or_path", "model"),
            "block_count": c["num_hidden_layers"],
            "context_length": c["max_position_embeddings"],
            "embedding_length": c["hidden_size"],
            "feed_forward_length": c["intermediate_size"],
            "attention.head_count": c["num_attention_heads"],
            "attention.head_count_kv": c["num_key_value_heads"],
            "attention.key_length": head_dim or c.get("head_dim") or
            c["hidden_size"] // c["num_attention_heads"],
            "attention.value_length": head_dim or c.get("head_dim") or
            c["hidden_size"] // c["num_attention_heads"]}


def _same_kv(gguf_path: Path, config_path: Path, lengths=(1, 777, 4096, 8192)) -> None:
    a, b = resolve(str(gguf_path)), resolve(str(config_path))
    assert [layer.kind for layer in a.layers] == [layer.kind for layer in b.layers]
    assert per_token_bytes(a.layers, BF16) == per_token_bytes(b.layers, BF16)
    for n in lengths:
        assert request_bytes(a.layers, n, BF16) == request_bytes(b.layers, n, BF16)


def test_llama_gguf_matches_its_config_json(tmp_path):
    c = _config("meta-llama--Llama-3.2-1B.json")
    path = _write(tmp_path / "llama.gguf", "llama", _dense_keys(c))
    _same_kv(path, CONFIGS / "meta-llama--Llama-3.2-1B.json")
    # Llama-3.2-1B: 16 layers x 8 KV heads x 64 x 2 (K, V) x 2 bytes per token
    assert per_token_bytes(resolve(str(path)).layers, BF16) == 16 * 8 * 64 * 2 * 2


def test_qwen3_gguf_matches_its_config_json(tmp_path):
    c = _config("Qwen--Qwen3-8B.json")
    path = _write(tmp_path / "qwen3.gguf", "qwen3", _dense_keys(c))
    _same_kv(path, CONFIGS / "Qwen--Qwen3-8B.json")
    assert per_token_bytes(resolve(str(path)).layers, BF16) == 36 * 8 * 128 * 2 * 2


def test_gemma2_gguf_keeps_its_sliding_window(tmp_path):
    c = _config("google--gemma-2-9b.json")
    keys = {**_dense_keys(c, c["head_dim"]), "attention.sliding_window": c["sliding_window"]}
    path = _write(tmp_path / "gemma2.gguf", "gemma2", keys)
    _same_kv(path, CONFIGS / "google--gemma-2-9b.json", lengths=(1, 4096, 8192))
    spec = resolve(str(path))
    # Gemma-2-9B at 8,192 tokens: 21 sliding layers hold 4,096, 21 full layers 8,192
    per_layer_token = 8 * 256 * 2 * 2
    assert request_bytes(spec.layers, 8192, BF16) == \
        21 * 4096 * per_layer_token + 21 * 8192 * per_layer_token


def test_nemotron_h_hybrid_gguf_matches_its_config_json(tmp_path):
    c = _config("nvidia--Nemotron-H-56B-Base-8K.json")
    pattern = c["hybrid_override_pattern"]
    keys = {"general.name": "Nemotron-H-56B", "block_count": c["num_hidden_layers"],
            "context_length": c["max_position_embeddings"],
            "embedding_length": c["hidden_size"],
            "attention.head_count": c["num_attention_heads"],
            # per layer, as the converter marks them: KV heads only on attention layers,
            # an MLP width only on MLP layers (both 0 on Mamba2 layers)
            "attention.head_count_kv": [c["num_key_value_heads"] if p == "*" else 0
                                        for p in pattern],
            "feed_forward_length": [c["intermediate_size"] if p == "-" else 0
                                    for p in pattern],
            "attention.key_length": c.get("head_dim") or c["hidden_size"] //
            c["num_attention_heads"],
            "ssm.conv_kernel": c["conv_kernel"],
            "ssm.inner_size": c["mamba_num_heads"] * c["mamba_head_dim"],
            "ssm.state_size": c["ssm_state_size"],
            "ssm.time_step_rank": c["mamba_num_heads"],
            "ssm.group_count": c["n_groups"]}
    path = _write(tmp_path / "nemotron_h.gguf", "nemotron_h", keys)
    _same_kv(path, CONFIGS / "nvidia--Nemotron-H-56B-Base-8K.json")


def test_weights_are_exact_from_tensor_infos(tmp_path):
    c = _config("meta-llama--Llama-3.2-1B.json")
    from kvplan.sources.gguf import weights

    w = weights(_write(tmp_path / "w.gguf", "llama", _dense_keys(c)))
    # 8 x 64 F16 = 1,024 B; 4 x 64 Q8_0 = 8 blocks of 32 values, 34 B each (fp16 scale + 32 int8)
    assert w.bytes_by_type == {"F16": 8 * 64 * 2, "Q8_0": 8 * 34}
    assert w.total_bytes == 1024 + 272 and w.total_params == 8 * 64 + 4 * 64


def test_cli_size_and_show_read_a_gguf(tmp_path):
    c = _config("Qwen--Qwen3-8B.json")
    path = _write(tmp_path / "qwen3.gguf", "qwen3", _dense_keys(c))
    runner = CliRunner()
    out = runner.invoke(app, ["size", str(path), "--tokens", "8k", "-f", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["per_token_bytes"] == 36 * 8 * 128 * 2 * 2
    shown = runner.invoke(app, ["show", str(path)])
    assert shown.exit_code == 0, shown.output


def test_truncated_unknown_and_missing_gguf_are_clear_errors(tmp_path):
    c = _config("Qwen--Qwen3-8B.json")
    good = _write(tmp_path / "q.gguf", "qwen3", _dense_keys(c))
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good.read_bytes()[:200])
    with pytest.raises(BadInputError, match="not a readable GGUF|truncated"):
        resolve(str(cut))
    odd = _write(tmp_path / "odd.gguf", "rwkv9", {"block_count": 4})
    with pytest.raises(BadInputError, match="rwkv9"):
        resolve(str(odd))
    with pytest.raises(KvplanError, match="no such file"):
        resolve(str(tmp_path / "absent.gguf"))
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a gguf at all" * 10)
    with pytest.raises(BadInputError):
        resolve(str(garbage))
