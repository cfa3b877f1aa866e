"""The README cannot drift from the code: its Python block runs as a doctest, every `kvplan`
command in its shell blocks runs through the CLI (the hub, GGUF and pip lines are left to the
tests that cover them: test_hub.py, test_gguf.py, test_fresh_install.py), and every flag its
text names is an option of some command. The same holds for the examples in each command's
--help, docs/engines.md's plugin engine and the YAML examples of the schema docs.

The figures in the README are the code's answers, not independent ones: what this test pins is
that the page says what the tool prints now. The engine maths behind them is tested by hand
formula and by real logs elsewhere (test_engines.py, test_budget.py)."""

from __future__ import annotations

import doctest
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from paths import FIXTURES, ROOT
from typer.testing import CliRunner

from kvplan.cli import app

README = ROOT / "README.md"

runner = CliRunner()


def _blocks(lang: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [body for fence_lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
            if fence_lang == lang]


def _commands() -> list[tuple[str, str]]:
    """(command, its comment) for each line of a ```sh block that runs `kvplan`."""
    found = []
    for body in _blocks("sh"):
        for line in body.replace("\\\n", " ").splitlines():
            code, _, comment = line.partition("  #")
            code = code.strip()
            if code.startswith("kvplan "):
                found.append((" ".join(code.split()), comment.strip()))
    return found


COMMANDS = _commands()

# Lines whose subject another test covers with what they need (a Hub, a GGUF file, torch for
# every library model), with the reason.
ELSEWHERE = {
    "kvplan size hf:": "the Hub: test_hub.py serves a fake one",
    "kvplan import hf:": "the Hub: test_hub.py",
    "kvplan size ./qwen3-8b-q4_k_m.gguf": "a GGUF file: test_gguf.py writes them",
    "kvplan validate --all": "every library model with torch: test_validate.py (slow)",
}
# Commands whose README line says they exit 1 (a target not met: the example shows a failure)
EXIT_1 = ("kvplan plan qwen3-32b --gpu a100-80gb --requests", "kvplan check ")
# What a command's README comment states (the command as written), and the output that says it
STATED = {
    "kvplan size llama-3.1-8b --tokens 8k": "8,192 tokens x batch 1",
    "kvplan size llama-3.1-70b --tokens 8k --batch 32": "80.000 GiB",
    "kvplan plan llama-3.1-8b --gpu h100 --context 128 --max-num-seqs 4":
        "4 requests of 128 tokens fit on 1x H100 SXM (vLLM 0.33), limited by max_num_seqs",
}

DEPLOYMENT_YAML = """\
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.1
          command: ["vllm", "serve"]
          args: ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "16384"]
"""


def _workdir(tmp_path: Path) -> Path:
    """The files the README's commands name, where they name them."""
    (tmp_path / "my-model").mkdir()
    shutil.copy(FIXTURES / "hf-configs" / "Qwen--Qwen3-8B.json",
                tmp_path / "my-model" / "config.json")
    (tmp_path / "deployment.yaml").write_text(DEPLOYMENT_YAML, encoding="utf-8")
    shutil.copy(FIXTURES / "logs" / "vllm-v1-llama-3.1-8b.log", tmp_path / "vllm-startup.log")
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "capacity.example.yaml", tmp_path / "docs")
    return tmp_path


def _params():
    for command, comment in COMMANDS:
        skip = next((why for prefix, why in ELSEWHERE.items() if command.startswith(prefix)),
                    None)
        # validate imports torch (seconds): with the slow cases
        marks = [pytest.mark.slow] if command.startswith("kvplan validate") else []
        if skip:
            marks.append(pytest.mark.skip(reason=skip))
        yield pytest.param(command, comment, marks=marks, id=command[7:60])


def test_the_readme_has_commands_to_run():
    assert len(COMMANDS) >= 30  # the extraction itself works
    runnable = [c for c, _ in COMMANDS if not any(c.startswith(p) for p in ELSEWHERE)]
    for prefix in EXIT_1:
        assert any(c.startswith(prefix) for c in runnable), f"README no longer runs {prefix!r}"
    assert set(STATED) <= set(runnable), set(STATED) - set(runnable)
    for prefix in ELSEWHERE:
        assert any(c.startswith(prefix) for c, _ in COMMANDS), f"stale ELSEWHERE {prefix!r}"


@pytest.mark.parametrize(("command", "comment"), list(_params()))
def test_readme_command_runs(command, comment, tmp_path, monkeypatch):
    if command.startswith(("kvplan report", "kvplan plot")):
        pytest.importorskip("matplotlib")
    monkeypatch.chdir(_workdir(tmp_path))
    args = shlex.split(command.partition(" > ")[0])[1:]
    # offline: a bare org/name the README shows resolves through the library's aliases
    res = runner.invoke(app, args, env={"COLUMNS": "100", "KVPLAN_DEBUG": "",
                                        "HF_HUB_OFFLINE": "1"})
    expected = 1 if command.startswith(EXIT_1) else 0
    assert res.exit_code == expected, (command, res.output)
    assert "Traceback" not in res.output
    assert "warning" not in res.stderr, (command, res.stderr)  # an example draws no warning
    if command in STATED:
        assert STATED[command] in res.stdout, (command, STATED[command])


def test_readme_python_block_runs_as_written():
    blocks = _blocks("pycon")
    assert blocks, "README's Python front door is a ```pycon block"
    parser = doctest.DocTestParser()
    runner_ = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for n, body in enumerate(blocks):
        test = parser.get_doctest(body, {}, f"README.md pycon block {n}", str(README), 0)
        assert test.examples
        runner_.run(test)
    assert runner_.failures == 0, "README's Python block no longer prints what the code gives"


def test_readme_hub_python_block_names_real_things():
    """The `From Python:` block needs the Hub and a checkpoint; its imports and the Weights
    fields its comment lists must exist."""
    (body,) = [b for b in _blocks("python") if "import_spec" in b]
    namespace: dict = {}
    exec("\n".join(line for line in body.splitlines() if line.startswith(("from ", "import "))),
         namespace)
    from dataclasses import fields

    from kvplan.sources.weights import Weights

    listed = re.search(r"Weights\(([^)]*)\)", body)
    assert listed is not None
    names = {f.name for f in fields(Weights)}
    assert {s.strip() for s in listed.group(1).split(",")} <= names


def _options() -> set[str]:
    import typer.main

    command = typer.main.get_command(app)
    found = {"--help", "--version"}
    for sub in command.commands.values():  # type: ignore[attr-defined]
        for param in sub.params:
            found.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("-"))
    return found


# Flags the README names that belong to an engine's own command line, not to kvplan
ENGINE_FLAGS = {"--gpus", "--model-id", "--quantization", "--tensor-parallel-size",
                "--max-model-len", "--gpu-memory-utilization", "--kv-cache-dtype", "-e",
                "--speculative-config"}


def test_every_flag_the_readme_names_exists():
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", text))
    unknown = sorted(named - _options() - ENGINE_FLAGS)
    assert unknown == [], f"README names flags no command has: {unknown}"


def test_engines_doc_plugin_example_runs_as_written():
    """docs/engines.md's minimal engine, executed as printed, plans through `--engine toy`."""
    from kvplan.engines import registry

    page = (ROOT / "docs" / "engines.md").read_text(encoding="utf-8")
    (body,) = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    try:
        exec(body, {"__name__": "engines_doc_example"})
        res = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "toy",
                                  "--context", "8k"], env={"COLUMNS": "100"})
    finally:
        registry.unregister("toy")
    assert res.exit_code == 0, res.output
    assert "(Toy), limited by toy blocks" in res.stdout


def _doc_yaml_blocks():
    for page in ("model-schema.md", "formulas.md", "capacity-schema.md"):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        for n, body in enumerate(re.findall(r"^```yaml\n(.*?)^```", text, re.S | re.M)):
            yield pytest.param(body, id=f"{page}-{n}")


# Figures the docs state for their example specs at 8,192 tokens, as the docs derive them
DOC_FIGURES = {
    # formulas.md: DeepSeek-V3.2 in fp8_ds_mla, 61 x (656 B record + 128 indexer keys + 4 B scale)
    "# deepseek-v3.2.yaml": (("--kv-dtype", "fp8_ds_mla"), "per_token_bytes",
                             61 * (656 + 128 + 1 * 4)),
    # model-schema.md: Qwen3-Next, 12 full layers x 2 heads x 256 x K,V x 2 B x 8,192 tokens
    # plus 36 gated-delta-net states of (3 x 8,192 + 32 x 128 x 128) bf16 values
    "# qwen3-next-80b-a3b.yaml": (
        (), "request_bytes", 12 * 2 * 256 * 2 * 2 * 8192 + 36 * (3 * 8192 + 32 * 128 * 128) * 2),
}


@pytest.mark.parametrize("body", list(_doc_yaml_blocks()))
def test_docs_yaml_examples_are_read_as_written(body, tmp_path):
    """Each model spec and capacity plan the docs print is one kvplan reads (exit 0), and
    gives the figures the docs state for it."""
    path = tmp_path / "example.yaml"
    path.write_text(body, encoding="utf-8")
    stated = DOC_FIGURES.get(body.splitlines()[0])
    if "kvplan.capacity/" in body:
        args = ["check", str(path)]
    else:
        assert "kvplan.model/" in body, "a docs YAML block that is neither spec nor plan"
        args = ["size", str(path), "--tokens", "8k", "-f", "json", *(stated[0] if stated else ())]
    res = runner.invoke(app, args, env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    if stated:
        assert json.loads(res.stdout)[stated[1]] == stated[2]


def test_doc_figures_name_examples_that_exist():
    firsts = {p.values[0].splitlines()[0] for p in _doc_yaml_blocks()}
    assert set(DOC_FIGURES) <= firsts


def _help_examples():
    """Each `kvplan ...` example line of every command's --help, as its docstring writes it."""
    import typer.main

    command = typer.main.get_command(app)
    for sub in command.commands.values():  # type: ignore[attr-defined]
        for line in (sub.help or "").splitlines():
            if line.strip().startswith("kvplan "):
                yield " ".join(line.split())


# --help examples that name a file the user has, or the Hub (the README test runs their kind)
HELP_NEEDS_A_FILE = ("kvplan show ./config.json", "kvplan import ", "kvplan explain ",
                     "kvplan check capacity.yaml", "kvplan size ./my-model/")


def _help_params():
    for command in _help_examples():
        marks = [pytest.mark.slow] if command.startswith("kvplan validate") else []
        if command.startswith(HELP_NEEDS_A_FILE):
            marks.append(pytest.mark.skip(reason="names a file of the user's, or the Hub"))
        yield pytest.param(command, marks=marks, id=command[7:60])


@pytest.mark.parametrize("command", list(_help_params()))
def test_help_example_runs(command, tmp_path, monkeypatch):
    if command.startswith(("kvplan report", "kvplan plot")):
        pytest.importorskip("matplotlib")
    monkeypatch.chdir(_workdir(tmp_path))
    args = shlex.split(command.partition(" > ")[0])[1:]
    res = runner.invoke(app, args, env={"COLUMNS": "100", "KVPLAN_DEBUG": ""})
    expected = 1 if command.startswith(EXIT_1) else 0
    assert res.exit_code == expected, (command, res.output)
    assert "Traceback" not in res.output


def test_help_examples_are_found():
    examples = list(_help_examples())
    assert len(examples) >= 30
    for prefix in HELP_NEEDS_A_FILE:
        assert any(c.startswith(prefix) for c in examples), f"stale skip {prefix!r}"


FORMULAS = (ROOT / "docs" / "formulas.md").read_text(encoding="utf-8")
# `Check: \`kvplan ...\` → \`"key": N\``: the command and the figure the page works out by hand
STATED_CHECKS = re.findall(r"Check: `(kvplan [^`]+)` → `\"(\w+)\": (\d+)`", FORMULAS)
LIBRARY_CHECKS = [c for c in re.findall(r"Check: `(kvplan size [^`]+)`", FORMULAS)
                  if ".yaml" not in c]  # a spec printed on the page: the YAML test reads it


def test_formulas_checks_are_found():
    assert len(STATED_CHECKS) >= 4 and len(LIBRARY_CHECKS) >= 10


@pytest.mark.parametrize(("command", "key", "value"), STATED_CHECKS)
def test_formulas_stated_check_gives_its_figure(command, key, value):
    res = runner.invoke(app, shlex.split(command)[1:], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[key] == int(value)


@pytest.mark.parametrize("command", LIBRARY_CHECKS)
def test_formulas_check_command_runs(command):
    res = runner.invoke(app, shlex.split(command)[1:], env={"COLUMNS": "100"})
    assert res.exit_code == 0, (command, res.output)
