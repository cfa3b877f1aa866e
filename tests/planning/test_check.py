"""`kvplan check`: plan files (schema kvplan.capacity/1) with line-numbered errors, the
pass/fail table, JUnit and the GitHub step summary. Expected numbers are hand formulas."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from paths import ROOT
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import SpecError
from kvplan.planning import check

EXAMPLE = ROOT / "docs" / "capacity.example.yaml"
GIB = 2**30
runner = CliRunner()

# Llama-3.1-8B: 32 layers x 8 KV heads x head_dim 128, K and V
LLAMA_TOKEN_BF16 = 2 * 32 * 8 * 128 * 2  # 131,072 B per token
BLOCK_BF16 = 16 * LLAMA_TOKEN_BF16  # vLLM block of 16 tokens: 2 MiB


def invoke(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env={"COLUMNS": "160", **(env or {})})


def write(tmp_path: Path, text: str, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# A plan whose budget is given (vLLM's logged "Available KV cache memory"): every figure
# follows from block arithmetic.
MEASURED = """\
schema: kvplan.capacity/1
deployments:
  - name: llama-60g
    model: llama-3.1-8b
    engine: {name: vllm, version: "0.11", kv_memory: 60GiB}
    max_model_len: 32k
    workload: 64x(2k+512)
    requires:
      min_concurrency: {concurrency: 16, context: 32k}
      min_context: {concurrency: 64, context: 4k}
      max_kv_bytes_per_request: {bytes: 1GiB, context: 8k}
      headroom_percent: 150
"""


def test_measured_budget_rows_follow_block_arithmetic(tmp_path):
    res = invoke("check", str(write(tmp_path, MEASURED)), "-f", "json")
    assert res.exit_code == 1, res.output  # 16 requests of 32k do not fit
    doc = json.loads(res.stdout)
    assert doc["schema"] == "kvplan.check/1" and doc["plan_schema"] == "kvplan.capacity/1"
    rows = {r["kind"]: r for r in doc["results"]}
    blocks = 60 * GIB // BLOCK_BF16  # 30,720; one is vLLM's null block
    usable = blocks - 1
    # 32k tokens = 2,048 blocks per request
    conc = rows["min_concurrency"]
    assert conc["measured"] == usable // (32768 // 16) == 14
    assert conc["margin"] == 14 - 16 and conc["passed"] is False
    assert conc["line"] == 9 and conc["limited_by"] == "KV blocks"
    # 64 requests share the blocks: 479 blocks = 7,664 tokens each
    ctx = rows["min_context"]
    assert ctx["measured"] == usable // 64 * 16 == 7664
    assert ctx["margin"] == 7664 - 4096 and ctx["passed"] is True
    # one 8k request: exactly 1 GiB, at the limit: passes with margin 0
    kv = rows["max_kv_bytes_per_request"]
    assert kv["measured"] == 8192 * LLAMA_TOKEN_BF16 == GIB
    assert kv["margin"] == 0 and kv["passed"] is True
    # 64 x (2k + 512) = 64 x 160 blocks; headroom = usable / needed - 1
    head = rows["workload_headroom"]
    needed = 64 * (2560 // 16)
    assert head["measured"] == round((usable / needed - 1) * 100, 2)
    assert head["required"] == 150 and head["passed"] is True
    assert doc["num_failed"] == 1 and doc["passed"] is False
    summary = doc["deployments"][0]
    assert summary["kv_budget_bytes"] == 60 * GIB
    assert summary["weights_per_gpu_bytes"] == 8_030_261_248 * 2  # parameters x bf16


def test_fp8_halves_the_block(tmp_path):
    plan = write(tmp_path, MEASURED.replace("max_model_len: 32k", "max_model_len: 32k\n"
                                            "    kv_dtype: fp8"))
    res = invoke("check", str(plan), "-f", "json")
    assert res.exit_code == 0, res.output
    rows = {r["kind"]: r for r in json.loads(res.stdout)["results"]}
    usable = 60 * GIB // (BLOCK_BF16 // 2) - 1  # 1-byte K and V
    assert rows["min_concurrency"]["measured"] == usable // 2048 == 29
    assert rows["max_kv_bytes_per_request"]["measured"] == GIB // 2


def test_the_library_api_gives_the_same_rows(tmp_path):
    plan = check.load_plan(write(tmp_path, MEASURED))
    assert [d.name for d in plan.deployments] == ["llama-60g"]
    assert plan.deployments[0].deployment.max_model_len == 32768
    result = check.check_plan(plan)
    assert [r.kind for r in result.results] == [
        "min_concurrency", "min_context", "max_kv_bytes_per_request", "workload_headroom"]
    assert not result.passed and result.num_failed == 1


# --- the example plan, through the CLI ------------------------------------------------------

def test_example_plan_exit_code_junit_and_step_summary(tmp_path):
    junit = tmp_path / "reports" / "capacity.xml"  # the folder is created
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    res = invoke("check", str(EXAMPLE), "--junit", str(junit),
                 env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert res.exit_code == 1, res.output
    assert "2 of 8 requirements not met (exit 1)" in res.stderr

    suites = ET.parse(junit).getroot()
    assert suites.tag == "testsuites"
    assert (suites.get("tests"), suites.get("failures"), suites.get("errors")) == ("8", "2", "0")
    cases = suites.findall("testsuite/testcase")
    assert len(cases) == 8
    failed = [c for c in cases if c.find("failure") is not None]
    assert {c.get("classname") for c in failed} == {"kvplan.check.chat-8b-l4-bf16"}
    kv_case = next(c for c in failed if c.get("name").startswith("max_kv_bytes_per_request"))
    # one 16k bf16 request of Llama-3.1-8B: 16,384 x 131,072 B = 2 GiB against a 1 GiB limit
    assert 16384 * LLAMA_TOKEN_BF16 == 2 * GIB
    assert "measured 2.000 GiB" in kv_case.find("failure").get("message")
    assert "margin -1.000 GiB" in kv_case.find("failure").get("message")

    text = summary.read_text()
    assert text.startswith("earlier step\n### kvplan check failed: 6 of 8 requirements met")
    lines = text.splitlines()
    header = "| deployment | measured quantity | required | measured | margin | result | " \
             "limited by | line |"
    assert header in lines
    row = next(x for x in lines if x.startswith("| chat-8b-l4-bf16 | KV per request"))
    assert row == ("| chat-8b-l4-bf16 | KV per request @ 16,384 tokens | <= 1.000 GiB | "
                   "2.000 GiB | -1.000 GiB (-100.0%) | FAIL | - | 33 |")
    assert "1 GiB = 2^30" in text and "Formula: margin = measured - required" in text


def test_example_plan_has_passing_and_failing_deployments():
    result = check.check_plan(check.load_plan(EXAMPLE))
    by_dep: dict[str, list[bool]] = {}
    for r in result.results:
        by_dep.setdefault(r.deployment, []).append(r.passed)
    assert by_dep == {"chat-8b-h100-fp8": [True] * 4, "chat-8b-l4-bf16": [False, False],
                      "rag-70b-tp4": [True, True]}
    rag = {r.kind: r for r in result.results if r.deployment == "rag-70b-tp4"}
    # 70B at TP 4: 80 layers x 8 KV heads / 4 x 128 x 2 (K, V) x 2 B = 81,920 B per token per
    # GPU; 40 GiB / (16 x 81,920 B) = 32,768 blocks, 32,767 usable
    usable = 40 * GIB // (16 * 2 * 80 * 2 * 128 * 2) - 1
    assert rag["min_context"].measured == usable // 16 * 16 == 32752
    # 16 x (16k + 1k) = 16 x 1,088 blocks, 2 x (96k + 2k) = 2 x 6,272 blocks, less the 4k shared
    # prefix (256 blocks) stored once instead of 18 times
    needed = 16 * 1088 + 2 * 6272 - 17 * 256
    assert rag["workload_headroom"].measured == round((usable / needed - 1) * 100, 2)


def test_passing_plan_exits_0_and_summary_appends(tmp_path):
    plan = write(tmp_path, MEASURED.replace("concurrency: 16, context: 32k",
                                            "concurrency: 14, context: 32k"))
    summary = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    junit = tmp_path / "junit.xml"
    first = invoke("check", str(plan), "--junit", str(junit), "-f", "markdown", env=env)
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith(f"**{plan}: all 4 requirements met**")
    suites = ET.parse(junit).getroot()
    assert suites.get("failures") == "0" and suites.get("tests") == "4"
    xml_once = junit.read_bytes()
    invoke("check", str(plan), "--junit", str(junit), env=env)
    assert junit.read_bytes() == xml_once  # no timestamps: the same plan, the same file
    assert summary.read_text().count("### kvplan check passed: 4 of 4 requirements met") == 2


def test_csv_is_one_row_per_requirement(tmp_path):
    res = invoke("check", str(write(tmp_path, MEASURED)), "-f", "csv")
    lines = res.stdout.splitlines()
    assert lines[0].startswith("deployment,kind,unit,required,measured,margin,passed,line")
    assert len(lines) == 1 + 4


# --- deployments that cannot start are failures, not errors -----------------------------------

def test_weights_that_leave_no_memory_fail_engine_starts(tmp_path):
    plan = write(tmp_path, """\
schema: kvplan.capacity/1
deployments:
  - name: too-big
    model: llama-3.1-8b
    gpu: l4
    weights_memory: 40GiB
    requires: {min_concurrency: {concurrency: 1, context: 1k}}
""")
    res = invoke("check", str(plan), "-f", "json")
    assert res.exit_code == 1, res.output
    (row,) = json.loads(res.stdout)["results"]
    assert row["kind"] == "engine_starts" and row["measured"] == 0 and not row["passed"]
    assert "no memory is left for the KV cache" in row["limited_by"]


def test_vllm_refusing_max_model_len_is_a_failed_row(tmp_path):
    plan = write(tmp_path, """\
schema: kvplan.capacity/1
deployments:
  - name: long
    model: llama-3.1-8b
    engine: {kv_memory: 1GiB, version: "0.33"}
    max_model_len: 128k
    requires: {min_concurrency: {concurrency: 1, context: 4k}}
""")
    res = invoke("check", str(plan), "-f", "json")
    assert res.exit_code == 1, res.output
    starts, conc = json.loads(res.stdout)["results"]
    # 1 GiB / 2 MiB = 512 blocks, one kept aside: 511 x 16 tokens is the longest request
    assert starts["kind"] == "engine_starts" and starts["required"] == 131072
    assert starts["measured"] == (GIB // BLOCK_BF16 - 1) * 16 == 8176
    assert conc["passed"] is True and conc["measured"] == 511 // 256


# --- bad plan files: exit 2 with file, line and field ------------------------------------------

BASE = """\
schema: kvplan.capacity/1
deployments:
  - name: a
    model: llama-3.1-8b
    gpu: h100
    max_model_len: 32k
    requires:
      min_concurrency: {concurrency: 4, context: 8k}
"""

BAD = [
    # (what, the change to BASE, line, field, words of the message)
    ("unknown key", ("gpu: h100", "gpu: h100\n    gpus: 2"), 6, "deployments[0].gpus",
     "is not a known field"),
    ("wrong type", ("concurrency: 4", "concurrency: four"), 8,
     "deployments[0].requires.min_concurrency.concurrency", "must be a whole number"),
    ("unknown model", ("llama-3.1-8b", "llama-9"), 4, "deployments[0].model",
     "unknown model 'llama-9'"),
    ("unknown GPU", ("gpu: h100", "gpu: h10O"), 5, "deployments[0].gpu", "unknown GPU 'h10O'"),
    ("context past max_model_len", ("context: 8k", "context: 64k"), 8,
     "deployments[0].requires.min_concurrency.context", "longer than the deployment's "
     "max_model_len 32,768"),
    ("headroom without workload", ("    requires:\n", "    requires:\n      headroom_percent: 5\n"),
     8, "deployments[0].requires.headroom_percent", "needs a workload"),
    ("key given twice", ("gpu: h100", "gpu: h100\n    gpu: a100"), 6, "deployments[0].gpu",
     "is given twice (first on line 5)"),
    ("schema version", ("capacity/1", "capacity/2"), 1, "schema", "this kvplan reads"),
    ("unquoted engine version", ("gpu: h100", "gpu: h100\n    engine: {version: 0.10}"), 6,
     "deployments[0].engine.version", "must be quoted text"),
    ("KV dtype the engine lacks", ("gpu: h100", "gpu: h100\n    kv_dtype: fp9"), 6,
     "deployments[0].kv_dtype", "no --kv-cache-dtype 'fp9'"),
    ("TP that does not divide", ("gpu: h100", "gpu: h100\n    tp: 3"), 6, "deployments[0].tp",
     "does not divide"),
    # the common settings are read by their rows (kvplan.engines.settings), as the flags and
    # launch lines are: `--tensor-parallel-size 2.0` is no whole number there either
    ("TP not a whole number", ("gpu: h100", "gpu: h100\n    tp: 2.0"), 6, "deployments[0].tp",
     "must be a whole number, got 2.0"),
    ("DCP past the GPUs an instance has", ("gpu: h100", "gpu: h100\n    dcp: 100000"), 6,
     "deployments[0].dcp", "must be between 1 and 65,536"),
    ("no memory named", ("    gpu: h100\n", ""), 3, "deployments[0]", "no memory to plan with"),
    ("no parameter count", ("llama-3.1-8b", str(ROOT / "tests" / "fixtures" / "tiny.yaml")),
     4, "deployments[0].model", "counted from its shapes: the spec has no hidden_size"),
    ("negative headroom", ("    requires:\n", "    workload: 4x(1k+1k)\n    requires:\n"
                           "      headroom_percent: -5\n"), 9,
     "deployments[0].requires.headroom_percent", "must be at least 0"),
    ("size without unit", ("    requires:\n", "    weights_memory: 15G\n    requires:\n"), 7,
     "deployments[0].weights_memory", "cannot read the size"),
    ("bad workload", ("    requires:\n", "    workload: lots\n    requires:\n"), 7,
     "deployments[0].workload", "cannot read the request mix"),
    ("requires empty", ("    requires:\n      min_concurrency: {concurrency: 4, context: 8k}\n",
                        "    requires: {}\n"), 7, "deployments[0].requires", "is empty"),
    ("nothing to check", ("    requires:\n      min_concurrency: {concurrency: 4, context: 8k}\n",
                          ""), 3, "deployments[0]", "has nothing to check"),
]


@pytest.mark.parametrize("what,change,line,field,words", BAD, ids=[b[0] for b in BAD])
def test_bad_plan_names_file_line_and_field(tmp_path, what, change, line, field, words):
    assert change[0] in BASE
    plan = write(tmp_path, BASE.replace(change[0], change[1], 1))
    junit = tmp_path / "junit.xml"
    res = invoke("check", str(plan), "--junit", str(junit))
    assert res.exit_code == 2, res.output
    assert f"{plan} line {line}: field '{field}': " in res.stderr, res.stderr
    assert words in res.stderr
    assert res.stdout == ""
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and f"line {line}" in error.get("message")


def test_invalid_yaml_names_line_and_column(tmp_path):
    plan = write(tmp_path, BASE.replace("concurrency: 4,", "concurrency: [4,"))
    res = invoke("check", str(plan))
    assert res.exit_code == 2
    assert f"{plan} line 8, column" in res.stderr and "is not valid YAML" in res.stderr


def test_missing_and_empty_files(tmp_path):
    assert invoke("check", str(tmp_path / "nope.yaml")).exit_code == 2
    empty = invoke("check", str(write(tmp_path, "")))
    assert empty.exit_code == 2 and "is empty" in empty.stderr
    listed = invoke("check", str(write(tmp_path, "- a\n")))
    assert listed.exit_code == 2 and "line 1: must be a mapping" in listed.stderr


def test_duplicate_deployment_names(tmp_path):
    plan = write(tmp_path, BASE + BASE.split("deployments:\n")[1])
    res = invoke("check", str(plan))
    assert res.exit_code == 2
    assert "line 9: field 'deployments[1].name': 'a' is already the name of the deployment " \
           "on line 3" in res.stderr


def test_load_plan_raises_spec_error_with_line(tmp_path):
    with pytest.raises(SpecError) as info:
        check.load_plan(write(tmp_path, BASE.replace("gpu: h100", "gpu: h10O")))
    assert info.value.source == f"{tmp_path / 'plan.yaml'} line 5"
    assert info.value.field == "deployments[0].gpu"


def test_anchors_x_keys_and_paths_beside_the_plan(tmp_path):
    spec = ROOT / "tests" / "fixtures" / "engines" / "models" / "llama-3.1-8b.yaml"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.yaml").write_text(spec.read_text())
    (tmp_path / "reqs.jsonl").write_text('{"prompt": 1000, "output": 24}\n' * 8)
    plan = write(tmp_path, """\
schema: kvplan.capacity/1
x-common: &common
  model: models/mine.yaml
  max_model_len: 8k
  engine: {kv_memory: 8GiB}
deployments:
  - <<: *common
    name: a
    workload: reqs.jsonl
  - <<: *common
    name: b
    kv_dtype: fp8
    workld: 1
""")
    res = invoke("check", str(plan))
    assert res.exit_code == 2
    assert "line 13: field 'deployments[1].workld': is not a known field" in res.stderr
    plan.write_text(plan.read_text().replace(
        "    workld: 1\n", "    requires: {min_concurrency: {concurrency: 1, context: 1k}}\n"))
    res = invoke("check", str(plan), "-f", "json")
    assert res.exit_code == 0, res.output
    a, b = json.loads(res.stdout)["results"]
    # a: 8 requests of 1,000 + 24 tokens = 8 x 64 blocks; 8 GiB / 2 MiB = 4,096 blocks, one aside
    assert a["kind"] == "workload_headroom" and a["required"] == 0
    assert a["measured"] == round(((GIB * 8 // BLOCK_BF16 - 1) / (8 * 64) - 1) * 100, 2)
    # b: fp8 (1-byte K and V) from the merged anchor: 8,192 blocks of 16 tokens, one aside
    assert b["measured"] == (8 * GIB // (BLOCK_BF16 // 2) - 1) // (1024 // 16)


def test_check_imports_no_matplotlib(tmp_path):
    from probes import probe

    result = probe(["check", str(EXAMPLE), "-f", "json"], ("matplotlib",))
    assert result.loaded == []
    # it ran to the end: the example plan fails 2 of its 8 requirements by design (exit 1)
    assert result.exit_code == 1 and json.loads(result.stdout)["schema"] == "kvplan.check/1"


def test_plan_file_reads_data_and_context_parallel(tmp_path):
    # 60 GiB of KV per rank and 8 data-parallel ranks: each rank holds its own requests
    # (usable blocks 30,720 - 1, a 32k request 2,048 blocks of 16), so 8 x 14 fit
    plan_yaml = """\
schema: kvplan.capacity/1
deployments:
  - name: dp8
    model: llama-3.1-8b
    count: 8
    dp: 8
    engine: {name: vllm, version: "0.11", kv_memory: 60GiB, enforce_eager: true}
    max_model_len: 32k
    requires:
      min_concurrency: {concurrency: 112, context: 32k}
"""
    res = invoke("check", str(write(tmp_path, plan_yaml)), "-f", "json")
    assert res.exit_code == 0, res.output
    planned = check.load_plan(write(tmp_path, plan_yaml))
    dep = planned.deployments[0].deployment
    assert (dep.tp, dep.dp, dep.num_gpus, dep.enforce_eager) == (1, 8, 8, True)
    assert 8 * ((60 * GIB // BLOCK_BF16 - 1) // (32768 // 16)) == 112
    over = plan_yaml.replace("concurrency: 112", "concurrency: 113")
    assert invoke("check", str(write(tmp_path, over, "over.yaml"))).exit_code == 1
    bad = plan_yaml.replace("dp: 8", "dp: 3")
    res = invoke("check", str(write(tmp_path, bad, "bad.yaml")))
    assert res.exit_code == 2 and "count" in res.stderr
