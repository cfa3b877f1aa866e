"""Fail closed: an architecture without a reader, or a cache-deciding key its reader does not
model, is refused by name (exit 2); --assume-standard-attention sizes it as plain attention
with a warning. docs/architectures.md is generated from the table and checked for drift."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from paths import ROOT
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import SpecError
from kvplan.core.layers import FullAttention
from kvplan.engines.vllm.served import removed
from kvplan.sources.hfarch import (
    FAMILIES,
    REGISTRY_FILE,
    architectures_markdown,
    registry_counts,
    registry_status,
    vllm_registry,
)
from kvplan.sources.hfconfig import spec_from_config

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 4,
         "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
         "max_position_embeddings": 8192}


def _refusal(raw: dict) -> SpecError:
    with pytest.raises(SpecError) as err:
        spec_from_config(raw, "config.json", name="m")
    return err.value


def test_a_known_unmodelled_key_is_refused_naming_key_and_architecture():
    err = _refusal({**LLAMA, "compress_ratios": [0, 4, 128, 0]})
    assert err.field == "compress_ratios"
    assert "on llama" in err.message
    assert "--assume-standard-attention" in str(err)


def test_an_unknown_cache_looking_key_is_refused():
    err = _refusal({**LLAMA, "kv_sharing_groups": [[0, 1], [2, 3]]})
    assert err.field == "kv_sharing_groups"
    assert "llama" in err.message


def test_another_familys_cache_key_is_refused():
    err = _refusal({**LLAMA, "mamba_d_state": 128})
    assert err.field == "mamba_d_state"


def test_an_architecture_without_a_reader_is_refused():
    err = _refusal({**LLAMA, "model_type": "brand_new_lm", "architectures": ["BrandNewLM"]})
    assert err.field == "model_type"
    assert "brand_new_lm" in err.message


def test_an_unknown_model_type_with_a_known_architecture_class_is_read():
    spec = spec_from_config({**LLAMA, "model_type": "my_llama_fork"}, "config.json", name="m")
    assert spec.num_layers == 4


def test_unset_keys_decide_nothing():
    # transformers writes defaults such as "sliding_window": null, "add_cross_attention": false
    spec = spec_from_config({**LLAMA, "compress_ratios": None, "kv_sharing_groups": []},
                            "config.json", name="m")
    assert spec.warnings == ()


def test_assume_standard_attention_sizes_plain_attention_with_a_warning():
    raw = {**LLAMA, "compress_ratios": [0, 4, 128, 0], "sliding_window": 128,
           "layer_types": ["sliding_attention"] * 4}
    spec = spec_from_config(raw, "config.json", name="m", assume_standard_attention=True)
    assert spec.layers == (FullAttention(8, 4096 // 32),) * 4
    assert len(spec.warnings) == 1 and "compress_ratios" in spec.warnings[0]


def test_cli_refuses_with_exit_2_and_warns_when_assumed(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "compress_ratios": [0, 4, 128, 0]}))
    runner = CliRunner()
    refused = runner.invoke(app, ["size", str(path), "-t", "1024"])
    assert refused.exit_code == 2
    assert "compress_ratios" in refused.output and "llama" in refused.output
    sized = runner.invoke(app, ["size", str(path), "-t", "1024", "-f", "json",
                                "--assume-standard-attention"])
    assert sized.exit_code == 0, sized.output
    payload = json.loads(sized.stdout)
    # 4 layers x K and V x 8 heads x 128 x bf16 per token
    assert payload["per_token_bytes"] == 4 * 2 * 8 * 128 * 2
    assert "compress_ratios" in sized.stderr


def test_every_family_lists_its_model_types_once():
    seen: list[str] = [t for family in FAMILIES for t in family.model_types]
    assert len(seen) == len(set(seen))


def test_architectures_page_has_not_drifted():
    page = (ROOT / "docs" / "architectures.md").read_text(encoding="utf-8")
    assert page == architectures_markdown(removed()), "run: python scripts/gen_architectures.py"
    script = ROOT / "scripts" / "gen_architectures.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_plan_takes_the_flag_too(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "model_type": "brand_new_lm",
                                "architectures": ["BrandNewLM"]}))
    runner = CliRunner()
    args = ["plan", str(path), "--kv-memory", "1GiB", "--max-model-len", "1024"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "brand_new_lm" in refused.output
    planned = runner.invoke(app, [*args, "--assume-standard-attention"])
    assert planned.exit_code == 0, planned.output
    assert "brand_new_lm" in planned.stderr


def test_names_that_merely_contain_a_cache_word_are_not_refused():
    # RedHat's FP8 Llama 4 Scout carries "for_llm_compressor" (a quantization tool's flag)
    spec = spec_from_config({**LLAMA, "for_llm_compressor": True, "prefill_chunk_size": 8192,
                             "context_window_size": 4096}, "config.json", name="m")
    assert spec.warnings == () and spec.num_layers == 4


def test_every_architecture_of_vllms_registry_is_read_or_refused_by_name():
    # kvplan/data/vllm-registry.txt: vLLM 0.33.0's generation registry (checked against the
    # wheel by tests/oracle/registry.py, below)
    version, entries = vllm_registry()
    names = [e.name for e in entries]
    assert version == "0.33.0" and len(names) == len(set(names)) == 274
    counts = registry_counts(names)
    assert counts["none"] == 0, [n for n in names if registry_status(n)[0] == "none"]
    assert counts["read"] + counts["refused"] == 274
    # every refusal names the cache kvplan does not model
    for name in names:
        status, why = registry_status(name)
        assert status == "read" or len(why) > 20, name


def test_a_refused_class_is_refused_whatever_its_model_type():
    err = _refusal({**LLAMA, "architectures": ["Step5ForCausalLM"]})
    assert err.field == "architectures"
    assert "cross-layer KV sharing" in err.message


def test_the_registry_snapshot_matches_the_oracles_wheel():
    sys.path.insert(0, str(ROOT / "tests" / "oracle"))
    import registry  # tests/oracle/registry.py

    source = registry.find_source()
    if source is None:
        pytest.skip("no vLLM wheel here (tests/oracle/setup.sh downloads it; CI's oracle step "
                    "runs tests/oracle/registry.py)")
    found = registry.read_registry(source)
    assert registry.snapshot_text(registry.wheel_version(source), found) == \
        REGISTRY_FILE.read_text(encoding="utf-8")
    assert registry_counts(sorted(found))["none"] == 0


def test_only_cache_deciding_keys_are_listed_as_a_readers_keys():
    # a key any reader lists is refused on every other architecture that sets it: a real
    # Qwen3.5 config's attn_output_gate (a projection, not the cache) must not be one
    from kvplan.sources.hfarch import ALL_CACHE_KEYS

    for benign in ("attn_output_gate", "linear_rope", "use_linear_silu", "group_norm_size"):
        assert benign not in ALL_CACHE_KEYS
