"""A new user's first ten minutes (issue 11): --version, the engines' own flag spellings, and
the same answer to the same mistake in every command. Each case failed on the code before."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from paths import FIXTURES, ROOT
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines.vllm.config import RULES

NEWEST_VLLM = ".".join(map(str, max(RULES)[:2]))  # the release kvplan plans for by default

runner = CliRunner()
TINY = str(FIXTURES / "tiny.yaml")
LLAMA = "llama-3.1-8b"


def invoke(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env={"COLUMNS": "100", **(env or {})})


def test_version():
    from kvplan import __version__

    res = invoke("--version")  # was "Missing command", exit 2
    assert res.exit_code == 0, res.output
    assert res.stdout == f"kvplan {__version__}\n"


def test_shell_completion_is_offered():
    res = invoke("--help")
    assert "--install-completion" in res.stdout and "--show-completion" in res.stdout


# --- one rule, every command --------------------------------------------------------------

def _plan_file(tmp_path: Path, engine: str, requires: str = "min_concurrency: "
               "{concurrency: 1, context: 8k}", model: str = LLAMA, gpu: str = "h100") -> str:
    path = tmp_path / "plan.yaml"
    path.write_text(f"schema: kvplan.capacity/1\ndeployments:\n  - name: a\n    model: {model}\n"
                    f"    gpu: {gpu}\n    engine: {engine}\n    requires: {{{requires}}}\n")
    return str(path)


@pytest.mark.parametrize("block", ["0", "7", "-16"])
def test_block_size_is_refused_the_same_everywhere(tmp_path, block):
    # plan --block-size 0 became 16, 7 was accepted; size refused 0 only
    for args in (["size", TINY, "--block-size", block],
                 ["plan", LLAMA, "--gpu", "h100", "--block-size", block],
                 ["check", _plan_file(tmp_path, f"{{name: vllm, block_size: {block}}}")]):
        res = invoke(*args)
        assert res.exit_code == 2, (args, res.output)
        assert "block" in res.stderr and "Traceback" not in res.output


def test_vllm_block_sizes_are_vllms():
    # vllm/config/cache.py: BlockSize = Literal[1, 8, 16, 32, 64, 128] (0.9-0.10), with 256
    # in 0.11.1 and 0.16.0
    for block in ("1", "128", "256"):
        assert invoke("plan", LLAMA, "--gpu", "h100", "--block-size", block).exit_code == 0
    res = invoke("plan", LLAMA, "--gpu", "h100", "--block-size", "512")
    assert res.exit_code == 2 and "valid: 1, 8, 16, 32, 64, 128, 256" in res.stderr
    res = invoke("plan", LLAMA, "--gpu", "h100", "--block-size", "256", "--engine-version",
                 "0.10.1")
    assert res.exit_code == 2 and "0.11.1" in res.stderr


@pytest.mark.parametrize("flag", ["--max-num-seqs", "--max-num-batched-tokens", "--parallel"])
def test_zero_counts_are_refused(flag):
    res = invoke("plan", LLAMA, "--gpu", "h100", flag, "0")  # accepted before
    assert res.exit_code == 2, res.output
    assert flag in res.stderr


@pytest.mark.parametrize("flag", ["--max-num-seqs", "--max-num-batched-tokens", "--parallel",
                                  "--dp"])
def test_counts_beyond_any_deployment_are_refused(flag):
    # --max-num-batched-tokens 1e20 gave a budget of -10,058,283,805,847 TiB and exit 1
    res = invoke("plan", LLAMA, "--gpu", "h100", flag, "100000000000000000000")
    assert res.exit_code == 2, res.output
    assert flag in res.stderr


def test_unknown_engine_version_lists_what_kvplan_knows(tmp_path):
    res = invoke("plan", LLAMA, "--gpu", "h100", "--engine-version", "99.0")  # accepted before
    assert res.exit_code == 2, res.output
    assert "99.0" in res.stderr and NEWEST_VLLM in res.stderr
    plan = _plan_file(tmp_path, '{name: vllm, version: "99.0"}')
    res = invoke("check", plan)
    assert res.exit_code == 2 and NEWEST_VLLM in res.stderr
    # a patch release of a known minor version is that version's rules
    assert invoke("plan", LLAMA, "--gpu", "h100", "--engine-version", "0.11.2").exit_code == 0


def test_models_kind_must_be_a_layer_kind():
    res = invoke("models", "--kind", "nonsense")  # exit 0 and an empty list before
    assert res.exit_code == 2, res.output
    assert "full, sliding, chunked, mla, cross, state, compressed, none" in res.stderr
    assert invoke("models", "--kind", "mla").exit_code == 0


def test_every_layer_kind_is_a_models_kind():
    # --help offered `--kind compressed` (DeepSeek-V4) and the command refused it as not a kind
    import typing

    from kvplan.core.layers import LAYER_KINDS, Layer

    kinds = {cls.__dataclass_fields__["kind"].default for cls in typing.get_args(Layer)}
    assert kinds == set(LAYER_KINDS)
    res = invoke("models", "--kind", "compressed", "-f", "json")
    assert res.exit_code == 0, res.output
    names = [m["name"] for m in json.loads(res.stdout)["models"]]
    assert "deepseek-v4-flash" in names  # model_configs/deepseek-v4-flash.yaml: compressed layers
    help_text = " ".join(invoke("models", "--help").stdout.split())
    assert "this kind: " + ", ".join(LAYER_KINDS) + "." in help_text


@pytest.mark.parametrize("lengths", ["2k,,4k", ",2k", "2k,", " , "])
def test_lengths_with_an_empty_item(lengths):
    res = invoke("size", TINY, "--lengths", lengths)  # the empty item was dropped before
    assert res.exit_code == 2, res.output
    assert "--lengths" in res.stderr


@pytest.mark.parametrize("mix", ["4x(1k+1k),,2x(1k+1k)", "4x(1k+1k),", ",4x(1k+1k)"])
def test_requests_with_an_empty_item(mix):
    res = invoke("plan", LLAMA, "--gpu", "h100", "--requests", mix)  # dropped, exit 0 before
    assert res.exit_code == 2, res.output
    assert "empty item" in res.stderr and "Traceback" not in res.output


def test_import_creates_the_folder_like_report(tmp_path):
    out = tmp_path / "new" / "deeper" / "tiny.yaml"
    res = invoke("import", TINY, "-o", str(out))  # "cannot write" before
    assert res.exit_code == 0, res.output
    assert out.read_text().startswith("schema: kvplan.model/1")


def test_junit_in_an_impossible_place_is_one_message(tmp_path):
    # /proc/x/r.xml was a FileNotFoundError traceback from mkdir
    blocker = tmp_path / "file"
    blocker.write_text("")
    for target in ("/proc/x/r.xml", str(blocker / "r.xml")):
        res = invoke("check", str(ROOT / "docs" /
                                  "capacity.example.yaml"), "--junit", target)
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith("kvplan: error: cannot write")


def test_gpus_shows_the_id_that_gpu_takes():
    res = invoke("gpus", "-f", "csv")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    by_name = {r["name"]: r["id"] for r in rows}
    assert by_name["H100 SXM"] == "h100"  # as the README writes --gpu h100
    from kvplan.sources.gpus import find_gpu

    for row in rows:  # every id shown finds its own GPU
        assert find_gpu(row["id"]).name == row["name"]
    shown = invoke("plan", LLAMA, "--gpu", by_name["RTX 4090"], "--kv-memory", "10GiB",
                   "-f", "json")
    assert json.loads(shown.stdout)["deployment"]["gpu"] == "RTX 4090"
    table = invoke("gpus", "h100", env={"COLUMNS": "200"})
    assert "--gpu" in table.stdout and " h100 " in table.stdout


@pytest.mark.parametrize("question", [["--context", "32k"], ["--requests", "8x(1k+1k)"]])
@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "llamacpp", "hf"])
def test_plan_csv_has_each_column_once(engine, question):
    res = invoke("plan", LLAMA, "--gpu", "h100", "--engine", engine, *question, "-f", "csv")
    assert res.exit_code in (0, 1), res.output
    header = next(csv.reader(io.StringIO(res.stdout)))
    assert len(header) == len(set(header)), sorted(h for h in header if header.count(h) > 1)
    assert header.count("max_concurrency") <= 1


def test_plan_csv_keeps_the_engines_and_the_answers_concurrency():
    # vLLM's "Maximum concurrency" is at max_model_len; the answer's at --context. One CSV
    # column held the answer while max_concurrency_fraction beside it was the engine's.
    res = invoke("plan", LLAMA, "--gpu", "h100", "--context", "32k", "-f", "csv")
    row = next(csv.DictReader(io.StringIO(res.stdout)))
    doc = json.loads(invoke("plan", LLAMA, "--gpu", "h100", "--context", "32k",
                            "-f", "json").stdout)
    assert int(row["max_concurrency"]) == doc["answer"]["max_concurrency"]
    assert float(row["engine_max_concurrency"]) == doc["engine"]["max_concurrency"]
    # 32k requests fit 131,072 / 32,768 = 4 times more often than max_model_len ones
    assert int(row["max_concurrency"]) > float(row["engine_max_concurrency"])


def test_does_not_fit_is_exit_1_in_plan_and_check(tmp_path):
    # 70B in bf16 (~131 GiB of weights) on one 24 GB card: exit 2 in plan, 1 in check before
    plan = invoke("plan", "llama-3.1-70b", "--gpu", "rtx-4090", "--context", "8k")
    assert plan.exit_code == 1, plan.output
    assert "no memory is left for the KV cache" in plan.stderr
    check = invoke("check", _plan_file(tmp_path, "vllm", model="llama-3.1-70b", gpu="rtx-4090"))
    assert check.exit_code == 1, check.output


@pytest.mark.parametrize("batch", ["100000000000000000000", "16777217"])
def test_batch_beyond_any_deployment(batch):
    res = invoke("size", TINY, "--batch", batch, "-t", "1")  # OverflowError traceback before
    assert res.exit_code == 2, res.output
    assert "--batch" in res.stderr


@pytest.mark.parametrize(("flag", "value"), [("--tokens", "1099511627777"),
                                             ("--tokens", "99999999999999999999999k"),
                                             ("--max-len", "2000000000000")])
def test_token_counts_beyond_any_deployment(flag, value):
    res = invoke("size", TINY, flag, value)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output


# --- the engines' own flag spellings --------------------------------------------------------

def _plan_json(*args: str) -> dict:
    res = invoke("plan", LLAMA, "--gpu", "h100", "--context", "8k", *args, "-f", "json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize(("ours", "theirs"), [
    (["--tp", "2"], ["--tensor-parallel-size", "2"]),
    (["--pp", "2", "--tp", "1"], ["--pipeline-parallel-size", "2", "--tp", "1"]),
    (["--kv-dtype", "fp8"], ["--kv-cache-dtype", "fp8"]),
    (["--gpu-memory-utilization", "0.8"], ["--mem-fraction-static", "0.8"]),
    (["--engine", "llamacpp", "--max-model-len", "16k"], ["--engine", "llamacpp", "-c", "16k"]),
    (["--engine", "llamacpp", "--max-model-len", "16k"],
     ["--engine", "llamacpp", "--ctx-size", "16k"]),
    (["--engine", "llamacpp", "--parallel", "4"], ["--engine", "llamacpp", "-np", "4"]),
    (["--engine", "llamacpp", "--kv-dtype", "q8_0"],
     ["--engine", "llamacpp", "-ctk", "q8_0", "-ctv", "q8_0"]),
])
def test_engine_spellings_are_aliases(ours, theirs):
    assert _plan_json(*theirs) == _plan_json(*ours)


def test_ctk_alone_leaves_v_in_f16():
    # llama.cpp: -ctk sets only the K cache; V keeps its default f16 (common/common.h)
    alone = json.loads(invoke("plan", LLAMA, "--gpu", "h100", "--engine", "llamacpp",
                              "-ctk", "q8_0", "-f", "json").stdout)
    both = json.loads(invoke("plan", LLAMA, "--gpu", "h100", "--engine", "llamacpp",
                             "-ctk", "q8_0", "-ctv", "f16", "-f", "json").stdout)
    assert alone == both


def test_size_takes_the_engine_spellings_too():
    ours = invoke("size", TINY, "--tp", "2", "--kv-dtype", "fp8", "-t", "1k", "-f", "json")
    theirs = invoke("size", TINY, "--tensor-parallel-size", "2", "--kv-cache-dtype", "fp8",
                    "-t", "1k", "-f", "json")
    assert ours.exit_code == 0 and ours.stdout == theirs.stdout


def test_the_hub_client_is_in_the_base_install():
    # `pip install kvplan` then `kvplan size hf:Qwen/Qwen3-8B` said to install an extra
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    base = [d.split(">")[0].split("=")[0].split("<")[0].strip()
            for d in meta["project"]["dependencies"]]
    assert "huggingface_hub" in base


# --- tables at 80 columns: never a cut number -------------------------------------------------

def _numbers(doc: object) -> set[int]:
    """Every whole number of at least 5 digits in a JSON document (the ones a narrow column
    would cut: '85,028,896,768' shown as '85,…')."""
    out: set[int] = set()
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) >= 10_000:
            out.add(item)
    return out


TABLE_COMMANDS = [
    ["size", LLAMA, "-t", "8k"],
    ["size", LLAMA, "--lengths", "2k,4k,32k", "--tp", "2"],
    ["models"],
    ["show", "deepseek-v3"],
    ["gpus"],
    ["plan", LLAMA, "--gpu", "h100", "--context", "32k"],
    ["plan", LLAMA, "--gpu", "h100", "--requests", "64x(2k+512),8x(32k+1k)"],
    ["compare", LLAMA, "qwen3-8b", "--gpu", "h100,l4", "--context", "32k"],
    ["check", str(ROOT / "docs" / "capacity.example.yaml")],
    ["whatif", LLAMA, "--tokens", "32k", "-p", "pyramid:512", "--gpu", "h100"],
    ["whatif", "llama-3.1-70b", "--gpu", "h100", "-n", "4", "--prompt", "2k", "--output",
     "512", "--shared-prefix", "1k", "--hit-rate", "0.9", "--prefill", "--tier",
     "host:512GiB@50GB/s", "--link", "ib-ndr"],
    ["compare", LLAMA, "--gpu", "h100", "--context", "32k", "-p", "share:2"],
    ["explain", str(FIXTURES / "logs" / "vllm-v1-llama-3.1-8b.log")],
]


@pytest.mark.slow  # imports torch and allocates: a few seconds
def test_validate_table_at_80_columns_keeps_every_number_whole():
    pytest.importorskip("torch")
    test_every_table_at_80_columns_keeps_every_number_whole(["validate", LLAMA, "-t", "1k"])


@pytest.mark.parametrize("args", TABLE_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_every_table_at_80_columns_keeps_every_number_whole(args):
    # gpus, compare, check and models printed '79.…' in an 80-column terminal
    table = invoke(*args, env={"COLUMNS": "80"})
    assert table.exit_code in (0, 1), table.output
    lines = table.stdout.splitlines()
    headline = 1 if args[0] == "plan" else 0  # one line, wrapped by the terminal if long
    assert all(len(line) <= 80 for line in lines[headline:]), \
        [line for line in lines if len(line) > 80]
    assert "…" not in table.stdout
    # a number folded over two lines leaves a piece ending in ',' or '.' or starting with ','
    # that the same output at full width does not have (prose has "16," of its own)
    from collections import Counter

    wide = invoke(*args, env={"COLUMNS": "1000"})
    extra = Counter(table.stdout.split()) - Counter(wide.stdout.split())
    cut = [t for t in extra if re.fullmatch(r"-?\d[\d,]*[,.]|[,.]\d[\d,.]*", t)]
    assert not cut, cut
    # and every large count the JSON holds that the table shows at all is shown whole
    as_json = invoke(*args, "-f", "json")
    if as_json.exit_code in (0, 1) and as_json.stdout.startswith("{"):
        tokens = set(re.findall(r"-?\d[\d,]*\d|\d", table.stdout))
        for n in _numbers(json.loads(as_json.stdout)):
            head = f"{n:,}".split(",")[0] + ","
            partial = [t for t in tokens if f"{n:,}".startswith(t) and t.startswith(head)]
            assert all(t == f"{n:,}" for t in partial), (n, partial)


def test_piped_output_uses_the_real_width(monkeypatch):
    from kvplan.cli import options

    monkeypatch.delenv("COLUMNS", raising=False)
    assert options._terminal_width() in range(40, 10_000)  # a terminal, or 80: never 120
    monkeypatch.setenv("COLUMNS", "67")
    assert options._terminal_width() == 67


def test_plan_starts_with_a_one_line_answer_and_keeps_notes_for_verbose():
    res = invoke("plan", LLAMA, "--gpu", "h100", "--context", "32k")
    doc = json.loads(invoke("plan", LLAMA, "--gpu", "h100", "--context", "32k",
                            "-f", "json").stdout)
    first = res.stdout.splitlines()[0]
    n = doc["answer"]["max_concurrency"]
    assert first == (f"{n} requests of 32,768 tokens fit on 1x H100 SXM (vLLM {NEWEST_VLLM}), "
                     f"limited by {doc['answer']['limited_by']}")
    assert "Formula" not in res.stdout and "--verbose" in res.stdout
    verbose = invoke("plan", LLAMA, "--gpu", "h100", "--context", "32k", "--verbose")
    assert verbose.stdout.splitlines()[0] == first
    assert "Engine log lines:" in verbose.stdout


def test_kv_dtype_help_names_every_kv_format():
    # nvfp4_ds_mla was accepted (and named in the README) but missing from --kv-dtype's help
    from kvplan.core.dtypes import format_names

    help_text = " ".join(invoke("size", "--help").stdout.split())
    # fp8_e4m3 is spelled fp8 in the help, as vLLM's --kv-cache-dtype spells it
    missing = [n for n in format_names() if n != "fp8_e4m3" and f" {n}," not in help_text
               and f" {n} " not in help_text]
    assert missing == []


def test_unknown_gpu_in_a_plan_file_names_the_plan_field(tmp_path):
    # the hint named only the CLI flag --gpu-memory, which a plan file has no place for
    res = invoke("check", _plan_file(tmp_path, "vllm", gpu="h10O"))
    assert res.exit_code == 2, res.output
    assert "gpu_memory: 24GiB in a plan file" in res.stderr
