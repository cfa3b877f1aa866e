"""The CLI through typer's runner: each format, exact output, errors and exit codes."""

import csv
import io
import json

import pytest
from paths import FIXTURES
from typer.testing import CliRunner

from kvplan.cli import app

TINY = str(FIXTURES / "tiny.yaml")
runner = CliRunner()

# tiny.yaml: 2 x (sliding window 1,024 + full), 2 KV heads x 64, bf16.
PER_LAYER_TOKEN = 2 * 2 * 64 * 2  # K+V x heads x head_dim x 2 bytes = 512 B


def invoke(*args, env=None):
    return runner.invoke(app, list(args), env={"COLUMNS": "100", **(env or {})})


def test_json_has_schema_ints_and_inputs():
    res = invoke("size", TINY, "--tokens", "2k", "--batch", "2", "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "kvplan.size/2"
    assert doc["inputs"]["tokens"] == 2048 and doc["inputs"]["batch"] == 2
    assert doc["per_token_bytes"] == 4 * PER_LAYER_TOKEN
    request = 2 * 1024 * PER_LAYER_TOKEN + 2 * 2048 * PER_LAYER_TOKEN
    assert doc["request_bytes"] == request
    assert doc["batch_bytes"] == 2 * request
    for key in ("per_token_bytes", "request_bytes", "batch_bytes", "paged_batch_bytes"):
        assert isinstance(doc[key], int)


def test_json_key_set_is_stable():
    doc = json.loads(invoke("size", TINY, "-t", "100", "-f", "json").stdout)
    assert set(doc) == {
        "schema", "kvplan_version", "inputs", "model", "per_token_bytes", "request_bytes",
        "batch_bytes", "per_gpu_batch_bytes", "all_gpus_batch_bytes", "paged_batch_bytes",
        "paged_waste_bytes", "contiguous_batch_bytes", "contiguous_waste_bytes",
        "stage_layers", "breakdown", "warnings"}
    assert set(doc["inputs"]) == {"model", "tokens", "batch", "length_counts", "kv_dtype", "tp",
                                  "pp", "block_size", "max_len"}


def test_csv_is_one_row_of_raw_ints():
    res = invoke("size", TINY, "-t", "2048", "-f", "csv")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == 1
    assert int(rows[0]["request_bytes"]) == 2 * 1024 * PER_LAYER_TOKEN + 2 * 2048 * PER_LAYER_TOKEN
    assert rows[0]["kv_dtype"] == "bf16"


def test_markdown_exact():
    res = invoke("size", TINY, "-t", "2k", "-b", "2", "-f", "markdown")
    assert res.exit_code == 0
    assert res.stdout.splitlines()[:8] == [
        "**tiny: 2,048 tokens x batch 2, KV bf16**",
        "",
        "| layer kind | layers | shape | per token (B) | per request | batch |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
        # sliding: 2 layers x 1,024 tokens x 512 B = 1 MiB per request
        "| sliding | 2 | 2 KV heads x 64, window 1,024 | 1,024 | 1.000 MiB | 2.000 MiB |",
        "| full | 2 | 2 KV heads x 64 | 1,024 | 2.000 MiB | 4.000 MiB |",
        "| total | 4 |  | 2,048 | 3.000 MiB | 6.000 MiB |",
        "",
    ]
    assert "1 GiB = 2^30 = 1,073,741,824 bytes" in res.stdout
    assert "Formula:" in res.stdout


def test_si_units_never_label_gib_as_gb():
    res = invoke("size", TINY, "-t", "2k", "-b", "2", "-f", "markdown", "--units", "si")
    # 6,291,456 bytes = 6.291 MB (10^6), not 6.000
    assert "| total | 4 |  | 2,048 | 3.146 MB | 6.291 MB |" in res.stdout
    assert "iB" not in res.stdout  # no binary unit anywhere in SI output
    assert "powers of 10" in res.stdout


def test_table_output_at_fixed_width():
    res = invoke("size", TINY, "-t", "2k")
    assert res.exit_code == 0
    lines = [line.rstrip() for line in res.stdout.splitlines()]
    assert lines[0] == "tiny: 2,048 tokens x batch 1, KV bf16"
    assert any(line.split() == ["total", "4", "2,048", "3.000", "MiB", "3.000", "MiB"]
               for line in lines)
    assert all(len(line) <= 100 for line in lines)


def test_mixed_lengths_say_whose_request_the_per_request_column_is():
    # was "tiny: 512 tokens x 3 requests of 512..2,048 tokens": the 512 read as every length
    res = invoke("size", TINY, "--lengths", "512,1k,2k", "-f", "markdown")
    assert res.exit_code == 0, res.output
    title = "tiny: 3 requests of 512..2,048 tokens (per request: the first, 512 tokens), KV bf16"
    assert res.stdout.splitlines()[0] == f"**{title}**"
    # the first request's bytes: sliding and full layers both hold 512 tokens
    first_request = 4 * 512 * PER_LAYER_TOKEN  # 1 MiB
    assert f"| total | 4 |  | 2,048 | {first_request / 2**20:.3f} MiB |" in res.stdout
    assert ("- Inputs: model tiny (hand-written test fixture), 3 requests of 512..2,048"
            in res.stdout)


def test_tokens_suffixes_are_binary():
    doc = json.loads(invoke("size", TINY, "-t", "1k", "-f", "json").stdout)
    assert doc["inputs"]["tokens"] == 1024


def test_lengths_list():
    doc = json.loads(invoke("size", TINY, "--lengths", "100,2k", "-f", "json").stdout)
    assert doc["inputs"]["length_counts"] == [[100, 1], [2048, 1]]
    assert doc["batch_bytes"] == 4 * 100 * PER_LAYER_TOKEN + (
        2 * 1024 + 2 * 2048) * PER_LAYER_TOKEN


def test_default_tokens_is_max_context():
    doc = json.loads(invoke("size", TINY, "-f", "json").stdout)
    assert doc["inputs"]["tokens"] == 4096


def test_longer_than_max_context_warns_on_stderr():
    res = invoke("size", TINY, "-t", "8k", "-f", "json")
    assert res.exit_code == 0
    assert "maximum context" in res.stderr
    json.loads(res.stdout)


@pytest.mark.parametrize(("args", "needle"), [
    (["size", "no-such-model"], "unknown model"),
    (["size", "llama-3.1-8", "-t", "1"], "did you mean"),
    (["size", TINY, "-t", "0"], "must be positive"),
    (["size", TINY, "-t", "-3"], "cannot read"),
    (["size", TINY, "-t", "12x"], "cannot read"),
    (["size", TINY, "-b", "0"], "must be positive"),
    (["size", TINY, "--kv-dtype", "fp7"], "valid: auto"),
    (["size", TINY, "--tp", "3"], "--tp 3"),
    (["size", TINY, "--format", "xml"], "--format"),
    (["size", TINY, "--lengths", "1,2", "-t", "5"], "--lengths"),
    (["size", "missing.yaml"], "no such file"),
])
def test_bad_input_is_one_message_and_exit_2(args, needle):
    res = invoke(*args)
    assert res.exit_code == 2, res.output
    assert needle in res.stderr
    assert "Traceback" not in res.output


def test_bad_yaml_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: kvplan.model/1\nname: x\nlayers: [\n  {kind: full\n")
    res = invoke("size", str(bad), "-t", "10")
    assert res.exit_code == 2
    assert str(bad) in res.stderr and "line" in res.stderr


def test_missing_field_names_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nlayers:\n  - {kind: full, count: 2, head_dim: 64}\n")
    res = invoke("size", str(bad), "-t", "10")
    assert res.exit_code == 2
    assert "layers[0].num_kv_heads" in res.stderr and "missing" in res.stderr


def test_non_positive_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nlayers:\n  - {kind: sliding, num_kv_heads: 2, head_dim: 64, "
                   "window: 0}\n")
    res = invoke("size", str(bad), "-t", "10")
    assert res.exit_code == 2
    assert "layers[0].window" in res.stderr


def test_debug_shows_traceback():
    res = invoke("size", "no-such-model", env={"KVPLAN_DEBUG": "1"})
    assert res.exit_code != 0
    assert res.exception is not None


def test_config_json_directory(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8,
        "num_key_value_heads": 2, "hidden_size": 512, "max_position_embeddings": 2048,
        "torch_dtype": "float16"}))
    doc = json.loads(invoke("size", str(tmp_path), "-t", "100", "-f", "json").stdout)
    assert doc["per_token_bytes"] == 2 * 4 * 2 * (512 // 8) * 2
    assert doc["inputs"]["kv_dtype"] == "fp16"  # auto = the checkpoint's dtype


def test_show_and_yaml_round_trip(tmp_path):
    res = invoke("show", TINY)
    assert res.exit_code == 0 and "sliding" in res.stdout
    out = invoke("show", TINY, "--format", "yaml").stdout
    copy = tmp_path / "copy.yaml"
    copy.write_text(out)
    a = json.loads(invoke("size", TINY, "-t", "3000", "-f", "json").stdout)
    b = json.loads(invoke("size", str(copy), "-t", "3000", "-f", "json").stdout)
    assert a["batch_bytes"] == b["batch_bytes"]
    # both are the hand figure: 2 sliding layers hold their 1,024 window, 2 full layers 3,000
    assert b["batch_bytes"] == (2 * 1024 + 2 * 3000) * PER_LAYER_TOKEN


def test_models_lists_library_and_filters():
    res = invoke("models", "-f", "json")
    names = [m["name"] for m in json.loads(res.stdout)["models"]]
    assert "llama-3.1-8b" in names
    res = invoke("models", "llama-3.1-8b", "-f", "csv")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["name"] for r in rows] == ["llama-3.1-8b"]
    assert int(rows[0]["per_token_bytes"]) == 2 * 32 * 8 * 128 * 2


def test_help_lists_commands_and_exit_codes():
    res = invoke("--help")
    assert res.exit_code == 0
    for word in ("size", "models", "show", "Exit codes"):
        assert word in res.stdout


@pytest.mark.parametrize("dtype", ["auto", "int4:g64:r128", "fp8"])
def test_model_dtype_must_be_a_float_format(tmp_path, dtype):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"name: x\ndtype: '{dtype}'\nlayers:\n  - {{kind: full, num_kv_heads: 2, "
                   "head_dim: 64}\n")
    res = invoke("size", str(bad), "-t", "10")
    assert res.exit_code == 2
    assert "field 'dtype'" in res.stderr and "bf16" in res.stderr


def test_pp_figures_are_each_the_largest_stage(tmp_path):
    # stage 0: one state layer (1,000 B state, no tokens); stage 1: one full layer.
    # Exact bytes peak on stage 1, but the state stage is what a one-token request pages most.
    spec = tmp_path / "two.yaml"
    spec.write_text(
        "name: two\nlayers:\n"
        "  - {kind: state, variant: mamba2, tensors: [{name: ssm, shape: [250], dtype: fp32}]}\n"
        "  - {kind: full, num_kv_heads: 1, head_dim: 4}\n")
    doc = json.loads(invoke("size", str(spec), "-t", "1", "--pp", "2", "--block-size", "256",
                            "--max-len", "10", "-f", "json").stdout)
    per_token = 2 * 1 * 4 * 2  # K+V x 1 head x 4 x bf16 = 16 B
    assert doc["per_gpu_batch_bytes"] == 250 * 4  # the state stage holds more than 16 B
    assert doc["paged_batch_bytes"] == max(250 * 4, 256 * per_token)  # full stage pages 4,096 B
    assert doc["contiguous_batch_bytes"] == max(250 * 4, 10 * per_token)


def test_a_figure_the_engine_lacks_shows_as_a_dash():
    # SGLang's SWA pool on a model without sliding layers printed "None" in the table
    args = ("plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang", "--context", "8k")
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    row = next(line for line in res.stdout.splitlines() if "swa_max_total_num_tokens" in line)
    assert row.split() == ["swa_max_total_num_tokens", "-"]
    assert "None" not in res.stdout
    doc = json.loads(invoke(*args, "-f", "json").stdout)
    assert doc["engine"]["swa_max_total_num_tokens"] is None  # JSON keeps null
