"""Weights: exact counts from real safetensors files built here, estimates from real configs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from paths import FIXTURES
from safetensors_files import header_prefix, write_safetensors
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import SpecError
from kvplan.sources.weights import (
    DtypeWeights,
    Weights,
    cheap_weights,
    estimate_weights,
    local_weights,
    read_header,
)

HUB = FIXTURES / "hub"
runner = CliRunner()

MIXED = {
    "embed.weight": ("BF16", [10, 4]),  # 40 params x 2 B = 80 B
    "norm.weight": ("F32", [4]),  # 4 x 4 B = 16 B
    "proj.weight": ("F8_E4M3", [3, 5]),  # 15 x 1 B = 15 B
    "step": ("I64", []),  # a scalar: 1 param, 8 B
    "packed": ("F4", [3, 3]),  # 9 x 4 bits = 36 bits -> 5 B
}


def config(name: str) -> dict:
    return json.loads((HUB / name).read_text())


# --- exact: headers -----------------------------------------------------------------------

def test_single_file_counts_params_and_bytes_per_dtype(tmp_path):
    write_safetensors(tmp_path / "model.safetensors", MIXED, metadata={"format": "pt"})
    w = local_weights(tmp_path)
    assert w == Weights(
        total_params=40 + 4 + 15 + 1 + 9, total_bytes=80 + 16 + 15 + 8 + 5,
        by_dtype=(DtypeWeights("BF16", 40, 80), DtypeWeights("F32", 4, 16),
                  DtypeWeights("F8_E4M3", 15, 15), DtypeWeights("I64", 1, 8),
                  DtypeWeights("F4", 9, 5)),
        exact=True, num_files=1)
    assert w.params_of("BF16") == 40 and w.bytes_of("F4") == 5 and w.params_of("U8") == 0


def test_sharded_index_counts_each_shard_once(tmp_path):
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors",
                      {"a": ("BF16", [8, 8]), "b": ("BF16", [8])})
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"c": ("F32", [2, 3])})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": 64 * 2 + 8 * 2 + 6 * 4},
        "weight_map": {"a": "model-00001-of-00002.safetensors",
                       "b": "model-00001-of-00002.safetensors",
                       "c": "model-00002-of-00002.safetensors"}}))
    # Mistral repos also ship the same weights as consolidated.safetensors: not counted twice
    write_safetensors(tmp_path / "consolidated.safetensors", {"a": ("BF16", [8, 8])})
    w = local_weights(tmp_path)
    assert (w.total_params, w.total_bytes, w.num_files) == (64 + 8 + 6, 144 + 24, 2)
    assert w.by_dtype == (DtypeWeights("BF16", 72, 144), DtypeWeights("F32", 6, 24))


def test_shards_without_index_and_consolidated_duplicate(tmp_path):
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {"a": ("F16", [4, 4])})
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"b": ("F16", [4])})
    write_safetensors(tmp_path / "consolidated.safetensors", {"a": ("F16", [4, 4])})
    assert local_weights(tmp_path).total_params == 16 + 4


def test_index_naming_a_missing_shard(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}}))
    with pytest.raises(SpecError, match="names model-00001-of-00002.safetensors, which is not"):
        local_weights(tmp_path)


def test_no_safetensors_means_unknown(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0" * 16)
    assert local_weights(tmp_path) is None
    assert cheap_weights("llama-3.1-8b") is None
    assert cheap_weights(str(tmp_path / "nope")) is None


# --- corrupt headers -------------------------------------------------------------------------

def _raw(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    return path


def _header_file(tmp_path: Path, header: dict, data_bytes: int) -> Path:
    text = json.dumps(header).encode()
    return _raw(tmp_path, len(text).to_bytes(8, "little") + text + bytes(data_bytes))


@pytest.mark.parametrize("data, message", [
    (b"\x01\x02", "is not a safetensors file: it has 2 bytes, fewer than the 8-byte header"),
    ((10**9).to_bytes(8, "little") + b"{}", "the length field says 1,000,000,000 bytes but 2 "
     "follow it"),
    ((0).to_bytes(8, "little") + b"{}", "the length field says 0 bytes"),
    ((6).to_bytes(8, "little") + b"{nope}", "has a corrupt safetensors header: not JSON"),
    ((4).to_bytes(8, "little") + b"\xff\xfe{}", "has a corrupt safetensors header: not JSON"),
    ((2).to_bytes(8, "little") + b"[]", "has a corrupt safetensors header: not a JSON object"),
])
def test_corrupt_header_is_a_clear_spec_error(tmp_path, data, message):
    path = _raw(tmp_path, data)
    with pytest.raises(SpecError) as err:
        local_weights(tmp_path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value)


@pytest.mark.parametrize("entry, data_bytes, message", [
    ({"dtype": "F16", "shape": [4, 4], "data_offsets": [0, 30]}, 32,
     "field 'w.data_offsets': span 30 bytes but shape [4, 4] of F16 needs 32"),
    ({"dtype": "F16", "shape": [4, 4], "data_offsets": [0, 32]}, 20,
     "field 'w.data_offsets': ends at byte 32 but the file holds 20 bytes of data"),
    ({"dtype": "F16", "shape": [4, 4], "data_offsets": [32, 0]}, 32,
     "field 'w.data_offsets': must be [begin, end] with 0 <= begin <= end"),
    ({"dtype": "F16", "shape": [4, "4"], "data_offsets": [0, 32]}, 32,
     "field 'w.shape': must be whole numbers"),
    ({"dtype": "F16", "shape": [4, 4]}, 32, "field 'w.data_offsets': is missing"),
    ("F16", 32, "field 'w': expected a mapping of fields"),
])
def test_inconsistent_tensor_entry(tmp_path, entry, data_bytes, message):
    _header_file(tmp_path, {"w": entry}, data_bytes)
    with pytest.raises(SpecError, match="model.safetensors: ") as err:
        local_weights(tmp_path)
    assert message in str(err.value)


def test_read_header_returns_header_and_data_size(tmp_path):
    prefix, data_bytes = header_prefix({"w": ("BF16", [2, 3])}, {"format": "pt"})
    path = _raw(tmp_path, prefix + bytes(data_bytes))
    header, size = read_header(path)
    assert header["__metadata__"] == {"format": "pt"}
    assert header["w"] == {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}
    assert size == 12


# --- estimates from config.json, checked against hand arithmetic --------------------------------

def test_estimate_llama2_7b_equals_its_published_count():
    w = estimate_weights(config("meta-llama--Llama-2-7b-hf.json"), "llama2", "fp16")
    # untied embeddings + LM head; per layer q,k,v,o + gate,up,down + 2 norms; final norm
    expected = 2 * 32000 * 4096 + 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 4096
    assert expected == 6_738_415_616
    assert w == Weights(expected, 2 * expected, (DtypeWeights("F16", expected, 2 * expected),),
                        exact=False)


def test_estimate_llama31_405b_gqa():
    w = estimate_weights(config("meta-llama--Meta-Llama-3.1-405B.json"), "405b")
    h, kv_out, inner = 16384, 8 * 128, 53248
    expected = (2 * 128256 * h + h
                + 126 * (2 * h * h + 2 * h * kv_out + 3 * h * inner + 2 * h))
    assert expected == 405_853_388_800  # Llama 3.1 405B's parameter count
    assert (w.total_params, w.total_bytes, w.exact) == (expected, 2 * expected, False)


def test_estimate_gemma2_ties_embeddings_and_has_four_norms():
    # peers.md: hf-vram-calc counts Gemma-2's tied embedding twice (10.16 B instead of 9.24 B)
    w = estimate_weights(config("google--gemma-2-9b.json"), "gemma2")
    h, q_out, kv_out = 3584, 16 * 256, 8 * 256
    expected = 256000 * h + h + 42 * (2 * h * q_out + 2 * h * kv_out + 3 * h * 14336 + 4 * h)
    assert expected == 9_241_705_984
    assert w.total_params == expected


def test_estimate_mixtral_moe():
    w = estimate_weights(config("mistralai--Mixtral-8x7B-v0.1.json"), "mixtral")
    h, kv_out = 4096, 8 * 128
    experts = 8 * 3 * h * 14336 + h * 8  # 8 gated experts + the router
    expected = 2 * 32000 * h + h + 32 * (2 * h * h + 2 * h * kv_out + experts + 2 * h)
    assert expected == 46_702_792_704  # Mixtral-8x7B's parameter count
    assert w.total_params == expected


def test_estimate_deepseek_v2_lite_mla_moe():
    w = estimate_weights(config("deepseek-ai--DeepSeek-V2-Lite.json"), "dsv2lite")
    h, heads, rank, rope, nope, v = 2048, 16, 512, 64, 128, 128
    attention = (h * heads * (nope + rope)  # q (no q_lora_rank)
                 + h * (rank + rope) + rank + rank * heads * (nope + v)  # kv_a, its norm, kv_b
                 + heads * v * h)  # o
    dense = 3 * h * 10944
    moe = 64 * 3 * h * 1408 + 2 * 3 * h * 1408 + h * 64  # routed + 2 shared + router
    expected = (2 * 102400 * h + h + 27 * (attention + 2 * h)
                + 1 * dense + 26 * moe)  # first_k_dense_replace = 1
    assert expected == 15_706_484_224  # DeepSeek-V2-Lite's Hub safetensors total
    assert w.total_params == expected


def test_estimate_needs_the_sizes():
    with pytest.raises(SpecError, match="num_attention_heads"):
        estimate_weights({"num_hidden_layers": 2, "vocab_size": 10}, "x.json")
    # the KV cache reads (head_dim given), the weights do not: no hidden_size
    with pytest.raises(SpecError, match="no hidden_size"):
        estimate_weights({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64,
                          "vocab_size": 10}, "x.json")


# --- the CLI: show and import ----------------------------------------------------------------

@pytest.fixture
def checkpoint(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    shutil.copy(HUB / "meta-llama--Llama-2-7b-hf.json", d / "config.json")
    write_safetensors(d / "model.safetensors", MIXED)
    return d


def test_show_local_checkpoint_prints_a_weights_line(checkpoint):
    res = runner.invoke(app, ["show", str(checkpoint), "-f", "markdown"])
    assert res.exit_code == 0, res.output
    assert ("- Weights: 69 parameters, 124 bytes (124 B) (exact, from the safetensors headers "
            "of 1 file): BF16 40 params = 80 B; F32 4 params = 16 B; F8_E4M3 15 params = 15 B; "
            "I64 1 params = 8 B; F4 9 params = 5 B.") in res.stdout.splitlines()
    assert "- Parameters: 69." in res.stdout.splitlines()
    doc = json.loads(runner.invoke(app, ["show", str(checkpoint), "-f", "json"]).stdout)
    assert doc["weights"]["total_params"] == 69 and doc["weights"]["exact"] is True
    assert doc["weights"]["by_dtype"][0] == {"dtype": "BF16", "num_params": 40, "num_bytes": 80}


def test_show_without_cheap_weights_has_no_weights_line(checkpoint):
    (checkpoint / "model.safetensors").unlink()
    for model in (str(checkpoint), "llama-3.1-8b"):
        res = runner.invoke(app, ["show", model, "-f", "json"])
        assert res.exit_code == 0, res.output
        assert "weights" not in json.loads(res.stdout)


def test_show_corrupt_local_safetensors_exits_2(checkpoint):
    (checkpoint / "model.safetensors").write_bytes(b"\x05")
    res = runner.invoke(app, ["show", str(checkpoint)])
    assert res.exit_code == 2
    assert "is not a safetensors file" in res.stderr


def test_import_local_checkpoint_records_exact_params(checkpoint, tmp_path):
    out = tmp_path / "out.yaml"
    res = runner.invoke(app, ["import", str(checkpoint), "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load(out.read_text())
    assert doc["num_params"] == 69
    # the published checkpoint: bytes per dtype from the headers (MIXED above)
    assert doc["checkpoint"]["bytes"] == {"BF16": 80, "F32": 16, "F8_E4M3": 15, "I64": 8,
                                          "F4": 5}
    assert doc["checkpoint"]["source"] == f"the safetensors headers of 1 file of {checkpoint}"
    assert doc["source"]["file"] == str(checkpoint / "config.json")
    assert len(doc["source"]["sha256"]) == 64
    assert "exact, from the safetensors headers of 1 file" in res.stderr


def test_import_config_only_estimates_but_does_not_record(checkpoint):
    (checkpoint / "model.safetensors").unlink()
    res = runner.invoke(app, ["import", str(checkpoint / "config.json")])
    assert res.exit_code == 0, res.output
    assert "num_params" not in yaml.safe_load(res.stdout)
    assert "kvplan: Weights: 6,738,415,616 parameters" in res.stderr
    assert "(an estimate from config.json" in res.stderr


def test_import_replaces_the_output_whole(checkpoint, tmp_path):
    out = tmp_path / "out.yaml"
    out.write_text("old content that is much longer than nothing\n" * 100)
    assert runner.invoke(app, ["import", str(checkpoint), "-o", str(out)]).exit_code == 0
    assert out.read_text().startswith("schema: kvplan.model/1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "out.yaml"]  # no temp left


def test_import_to_an_unwritable_place(checkpoint, tmp_path):
    # a missing folder is created (as `report -o` does); a folder that is a file cannot be
    (tmp_path / "no").write_text("a file, not a folder")
    res = runner.invoke(app, ["import", str(checkpoint), "-o", str(tmp_path / "no" / "x.yaml")])
    assert res.exit_code == 2
    assert f"kvplan: error: cannot write {tmp_path / 'no' / 'x.yaml'}: " in res.stderr
