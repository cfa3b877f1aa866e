"""Hostile and careless input (issue 11): every case ends in a result or one message with exit
code 2, never a traceback, a crash of the YAML parser, or unbounded memory.

Cases that could take the interpreter down (a segfault, gigabytes of memory) run in a child
process with an address-space limit, so a regression fails the test instead of the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.sources.reader import MAX_DEPTH, parse_json, parse_yaml

runner = CliRunner()

# 9 aliases per level over 8 levels: 9**8 = 43,046,721 strings once expanded, from ~330 bytes
BOMB = "schema: kvplan.capacity/1\n" + 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n"
    for a, b in zip("abcdefg", "bcdefgh", strict=True)) + "deployments: [*h]\n"


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "100"})


def _child(args: list[str], limit_bytes: int = 1 << 30, timeout: float = 60
           ) -> subprocess.CompletedProcess[str]:
    """`kvplan ARGS` in a fresh interpreter that may use at most limit_bytes of memory."""

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KVPLAN_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT,
                          preexec_fn=limit if sys.platform.startswith("linux") else None)


def _one_message(res: subprocess.CompletedProcess[str], needle: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr
    assert res.stderr.startswith("kvplan: error:"), res.stderr[-2000:]
    # one message: the error line, then at most a hint
    rest = res.stderr.splitlines()[1:]
    assert len(rest) <= 1 and all(line.lstrip().startswith("hint:") for line in rest), res.stderr
    assert needle in res.stderr, res.stderr


def test_bomb_is_small():
    assert len(BOMB.encode()) < 512


def test_alias_bomb_plan_fails_at_once_in_bounded_memory(tmp_path):
    plan = tmp_path / "bomb.yaml"
    plan.write_text(BOMB)
    _one_message(_child(["check", str(plan)], limit_bytes=1 << 30), "expands to more than")


def test_alias_bomb_model_spec(tmp_path):
    spec = tmp_path / "bomb.yaml"
    spec.write_text(BOMB.replace("kvplan.capacity/1", "kvplan.model/1"))
    _one_message(_child(["size", str(spec)], limit_bytes=1 << 30), "expands to more than")


def test_alias_count_is_bounded():
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * 5000) + "]\n"
    with pytest.raises(KvplanError, match="aliases"):
        parse_yaml(text, "x.yaml")


def test_self_referencing_alias():
    with pytest.raises(KvplanError, match="refers to a value that contains it"):
        parse_yaml("a: &a [1, *a]\n", "x.yaml")


def test_100000_nested_brackets_in_a_spec_do_not_crash_the_parser(tmp_path):
    # PyYAML's C composer recursed once per level: exit 139 (segfault) on this file
    spec = tmp_path / "deep.yaml"
    spec.write_text("schema: kvplan.model/1\nname: x\nlayers: " + "[" * 100_000 + "\n")
    # kvplan's behaviour, not the YAML library's wording: libyaml >= 0.2.6 (PyYAML 6.0.4's
    # wheels) stops deep nesting itself at 1,000 levels, before kvplan's own depth check
    # (test_nesting_at_the_limit_still_parses pins that one); either way: exit 2, one line
    # naming the file, no traceback, in bounded memory
    _one_message(_child(["size", str(spec)]), str(spec))


def test_5000_nested_brackets_in_a_plan(tmp_path):
    plan = tmp_path / "deep.yaml"
    plan.write_text("schema: kvplan.capacity/1\ndeployments: " + "[" * 5000 + "\n")
    # exit 2 and one line naming the file, whichever of kvplan or libyaml stops it first
    _one_message(_child(["check", str(plan)]), str(plan))


def test_nesting_at_the_limit_still_parses():
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    value = parse_yaml(text, "x.yaml")
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []
    with pytest.raises(KvplanError, match="nests deeper"):
        parse_yaml("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "x.yaml")


def test_deep_json_config(tmp_path):
    with pytest.raises(KvplanError, match="nests deeper"):
        parse_json(b"[" * 5000 + b"]" * 5000, "config.json")
    with pytest.raises(KvplanError, match="nests deeper"):
        parse_json(b'{"a": ' * 100 + b"1" + b"}" * 100, "config.json")


def _spec(tmp_path: Path, count: str) -> str:
    path = tmp_path / "m.yaml"
    path.write_text("schema: kvplan.model/1\nname: m\nlayers:\n"
                    f"  - {{kind: full, count: {count}, num_kv_heads: 8, head_dim: 128}}\n")
    return str(path)


def test_layer_count_is_bounded_before_any_list_is_built(tmp_path):
    # count: 1000000000 took 27 s and 15.6 GB before the layer-count error
    res = _child(["size", _spec(tmp_path, "1000000000")], limit_bytes=1 << 30, timeout=30)
    _one_message(res, "layers[0].count")


@pytest.mark.parametrize("count", ["1.0e+20", "1e20", ".inf", ".nan", "true", "10001", "-1",
                                   "2.5", "'8'"])
def test_layer_count_must_be_a_whole_number_in_range(tmp_path, count):
    # count: 1e20 (a float in JSON or YAML 1.2 spelling) was an OverflowError traceback
    res = invoke("size", _spec(tmp_path, count))
    assert res.exit_code == 2, res.output
    assert "layers[0].count" in res.stderr


def test_repeat_is_bounded_before_any_list_is_built(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("schema: kvplan.model/1\nname: m\nlayers:\n  - repeat: 5000\n    layers:\n"
                    "      - {kind: full, num_kv_heads: 8, head_dim: 128}\n"
                    "      - {kind: full, num_kv_heads: 8, head_dim: 128}\n"
                    "      - {kind: none}\n")
    res = invoke("size", str(path))
    assert res.exit_code == 2
    assert "layers[0].repeat" in res.stderr and "15,000 layers" in res.stderr


def test_10000_layers_is_still_accepted_and_planned_in_bounded_memory(tmp_path):
    # the limit (kvplan.core.spec.MAX_LAYERS) is the most a spec may describe; a spec at the
    # limit is read, and planned (weights, budget, every layer's pages) in a child held to
    # 512 MiB and 60 s: at 100,000 layers, the earlier limit, a plan took 10-60 s and 1.2 GB
    from kvplan.sources.yamlspec import load_yaml_file

    path = _spec(tmp_path, "10000")
    assert load_yaml_file(Path(path)).num_layers == 10_000
    res = _child(["plan", path, "--gpu", "h100", "--kv-memory", "60GiB"],
                 limit_bytes=512 << 20, timeout=60)
    assert res.returncode in (0, 1), res.stderr
    assert "Traceback" not in res.stderr


def test_huge_head_dim_is_refused(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("schema: kvplan.model/1\nname: m\nlayers:\n"
                    "  - {kind: full, num_kv_heads: 8, head_dim: 1000000000}\n")
    res = invoke("size", str(path))
    assert res.exit_code == 2 and "head_dim" in res.stderr


def test_huge_ssm_state_is_refused_like_any_other_width():
    # shapes.ssm widths are bounded as every other yaml width (2**20), optional ones too
    from kvplan.core.errors import SpecError
    from kvplan.sources.fields import Fields
    from kvplan.sources.yamlspec import _read_ssm

    base = {"kind": "mamba2", "d_inner": 8192, "d_state": 128, "d_conv": 4}
    assert _read_ssm(Fields(dict(base), "m.yaml", "shapes.ssm")).d_state == 128
    for name in ("d_state", "n_groups"):
        with pytest.raises(SpecError, match=name):
            _read_ssm(Fields({**base, name: 2**20 + 1}, "m.yaml", "shapes.ssm"))


def test_size_of_dev_zero_is_refused_without_reading_it_all():
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero here")
    # a MemoryError traceback before: the whole endless file was read
    _one_message(_child(["size", "/dev/zero"], limit_bytes=1 << 30), "not a regular file")


def test_a_file_larger_than_the_limit(tmp_path, monkeypatch):
    from kvplan.sources import reader

    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * 2048)
    with pytest.raises(KvplanError, match="larger than"):
        reader.read_bytes(str(big), max_bytes=1024)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)  # open() would wait for a writer forever
    _one_message(_child(["size", str(fifo)], timeout=20), "not a regular file")


def test_a_model_name_too_long_for_a_path():
    res = invoke("size", "a" * 5000)  # OSError: File name too long, a traceback
    assert res.exit_code == 2, res.output
    assert "unknown model" in res.stderr


def test_sweep_range_is_counted_before_it_is_built():
    res = invoke("sweep", "llama-3.1-8b", "--tokens", "1..1099511627776:1")  # MemoryError
    assert res.exit_code == 2, res.output
    assert "--tokens range" in res.stderr


def _plan(tmp_path: Path, extra: str) -> str:
    path = tmp_path / "plan.yaml"
    path.write_text("schema: kvplan.capacity/1\ndeployments:\n  - name: a\n"
                    "    model: llama-3.1-8b\n    gpu: h100\n" + extra)
    return str(path)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_headroom_percent_must_be_a_finite_number(tmp_path, value):
    plan = _plan(tmp_path, "    workload: {requests: '8x(1k+1k)'}\n"
                 f"    requires: {{headroom_percent: {value}}}\n")
    res = invoke("check", plan)
    assert res.exit_code == 2, res.output
    assert "headroom_percent" in res.stderr and "Traceback" not in res.output


@pytest.mark.parametrize("workload", ['""', "{requests: ''}", "{requests: ','}"])
def test_empty_workload_in_a_plan(tmp_path, workload):
    plan = _plan(tmp_path, f"    workload: {workload}\n    requires: {{min_concurrency: 1}}\n")
    res = invoke("check", plan)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize("requests", ["", " ", ",", ",,"])
def test_empty_requests_flag(requests):
    res = invoke("plan", "llama-3.1-8b", "--gpu", "h100", "--requests", requests)
    assert res.exit_code == 2, res.output
    assert "request mix is empty" in res.stderr


def test_limits_hold_without_libyaml(monkeypatch):
    # PyYAML built without libyaml: the pure-Python parser, the same guard
    monkeypatch.setitem(sys.modules, "yaml._yaml", None)
    with pytest.raises(KvplanError, match="nests deeper"):
        parse_yaml("a: " + "[" * 10_000, "x.yaml")
    with pytest.raises(KvplanError, match="expands to more than"):
        parse_yaml(BOMB, "x.yaml")
    assert parse_yaml("a: &x {b: 1}\nc: {<<: *x, d: 2}\n", "x.yaml") == {
        "a": {"b": 1}, "c": {"b": 1, "d": 2}}


# --- config.json values that decide the cache: present but null or nonsense is an error ---

CONFIGS = ROOT / "tests" / "fixtures" / "hf-configs"


def _config(tmp_path: Path, fixture: str, **changes: object) -> str:
    import json

    raw = json.loads((CONFIGS / fixture).read_text())
    for key, value in changes.items():
        if value is _DELETE:
            del raw[key]
        else:
            raw[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return str(path)


_DELETE = object()


@pytest.mark.parametrize(("fixture", "changes", "field"), [
    # sized as plain attention before: 128 heads x (192 + 128) per layer, ~40x the latent
    ("deepseek-ai--DeepSeek-V3.json", {"kv_lora_rank": None}, "kv_lora_rank"),
    ("moonshotai--Kimi-K2-Instruct.json", {"kv_lora_rank": None}, "kv_lora_rank"),
    # became bf16
    ("meta-llama--Meta-Llama-3-8B.json", {"torch_dtype": "bfloat61"}, "torch_dtype"),
    ("meta-llama--Meta-Llama-3-8B.json", {"torch_dtype": 16}, "torch_dtype"),
    # became the LlamaConfig default of 32 layers
    ("meta-llama--Meta-Llama-3-8B.json", {"num_hidden_layers": _DELETE}, "num_hidden_layers"),
    ("meta-llama--Meta-Llama-3-8B.json", {"num_hidden_layers": None}, "num_hidden_layers"),
    # accepted
    ("meta-llama--Meta-Llama-3-8B.json", {"hidden_size": 1e9}, "hidden_size"),
    ("meta-llama--Meta-Llama-3-8B.json", {"num_attention_heads": 10**9}, "num_attention_heads"),
    ("meta-llama--Meta-Llama-3-8B.json", {"num_hidden_layers": 1e20}, "num_hidden_layers"),
    ("meta-llama--Meta-Llama-3-8B.json", {"num_key_value_heads": True}, "num_key_value_heads"),
    ("meta-llama--Meta-Llama-3-8B.json", {"max_position_embeddings": float("nan")},
     "max_position_embeddings"),
    ("ai21labs--AI21-Jamba-1.5-Mini.json", {"attn_layer_offset": 8}, "attn_layer_offset"),
])
def test_cache_deciding_config_fields(tmp_path, fixture, changes, field):
    res = invoke("size", _config(tmp_path, fixture, **changes), "-t", "1k")
    assert res.exit_code == 2, res.output
    assert f"field '{field}'" in res.stderr, res.stderr
    assert "Traceback" not in res.output


def test_full_attention_interval_beyond_the_layers(tmp_path):
    # 1e9 gave a model with no attention layers at all
    raw = {"model_type": "qwen3_next", "num_hidden_layers": 48, "full_attention_interval": 1e9,
           "torch_dtype": "bfloat16"}
    path = tmp_path / "config.json"
    path.write_text(__import__("json").dumps(raw))
    res = invoke("size", str(path), "-t", "1k")
    assert res.exit_code == 2, res.output
    assert "full_attention_interval" in res.stderr


def test_the_untouched_fixtures_still_read(tmp_path):
    for name in ("deepseek-ai--DeepSeek-V3.json", "meta-llama--Meta-Llama-3-8B.json",
                 "ai21labs--AI21-Jamba-1.5-Mini.json"):
        res = invoke("size", _config(tmp_path, name), "-t", "1k", "-f", "json")
        assert res.exit_code == 0, (name, res.output)


@pytest.mark.parametrize(("name", "text", "needle"), [
    ("wide.csv", "prompt,output\n" + "1" * 200_000 + ",5\n", "not a usable CSV"),  # csv.Error
    ("big.jsonl", '{"prompt": 100000000000000000000000, "output": 1}\n', "beyond any"),
    ("deep.jsonl", "[" * 100_000 + "\n", "line 1"),
    ("inf.jsonl", '{"prompt": 1e400, "output": 1}\n', "prompt"),
    ("bool.jsonl", '{"prompt": true, "output": 1}\n', "prompt"),
])
def test_hostile_workload_files(tmp_path, name, text, needle):
    path = tmp_path / name
    path.write_text(text)
    res = invoke("plan", "llama-3.1-8b", "--gpu", "h100", "--requests", str(path))
    assert res.exit_code == 2, res.output
    assert needle in res.stderr and "Traceback" not in res.output
