"""Real launch lines (tests/fixtures/launch/index.yaml: public issues and documents, each with
the KV figure its engine then logged) planned through `kvplan plan --from-command`.

Every line must parse: exit 0, or 1 where the engine would not fit the request; never a usage
error. The test prints how many land within 5% of the logged figure, and holds the lines that
do to that (a regression moves one out). `python tests/sources/test_launch_corpus.py` prints
the table of docs/engine-accuracy.md section 9, each line with the kvplan command that gives
its figure; a test keeps the document equal to it."""

from __future__ import annotations

import json
import shlex
import sys
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/

import pytest
import yaml
from accuracy_doc import assert_in_accuracy_doc
from paths import FIXTURES, ROOT
from typer.testing import CliRunner

from kvplan.cli import app

CORPUS = FIXTURES / "launch" / "index.yaml"
runner = CliRunner()

with CORPUS.open() as handle:
    ENTRIES: list[dict[str, Any]] = yaml.safe_load(handle)["lines"]

# the lines kvplan does not plan within 5% of the engine's own figure, each with what is
# missing; docs/engine-accuracy.md section 9 explains each from the engine's source. Every other
# line must land within 5%, and a line listed here that comes within 5% must leave the list.
KNOWN_MISSES = {
    "sglang-jerryzsj-r1-distill-qwen7b-rtx3090": "0.42 GiB of the RTX 3090 the Windows host "
                                                 "keeps (22.76 GB free before the load, logged; "
                                                 "kvplan's 23.18)",
    "vllm-i21348-qwen3-235b-fp8-4xh100": "0.46 GiB a GPU beside NCCL's not identified; "
                                          "LMCache 0.3.2's GPU buffer is 12.3 MB, made "
                                          "after 0.9.2's snapshot and not counted",
    "vllm-i27508-gpt-oss-120b-h100-mnbt1024": "0.08 GiB the card's total (79.11 GiB in the "
                                              "thread's OOM); 0.14 GiB outside the torch "
                                              "peak; a candidate: non-torch growth (0.16 GiB in "
                                              "an H100 V0 log, 64 MiB counted), not printed",
    "vllm-i34076-qwen3-coder-30b-fp8-pp-16-32": "0.50 GiB on the RTX 5070 Ti not identified "
                                                "(its copy of the LM head counted)",
    "vllm-pr12569-llama-3.1-70b-w8a8-v1": "0.59 GiB outside 0.7.1's torch peak (the "
                                          "absolute non-torch term on an unnamed GPU) not "
                                          "identified",
    "vllm-qwen-i16-qwen15-7b-gptq-3090": "0.3.0 counts torch's reserved segments (total - "
                                         "free, ~0.6 GiB over the peak), not modelled "
                                         "(exllama's 86 MiB temp_dq is)",
    "tgi-ms-build-mi300-llama-3-8b": "the posted log is a two-shard run that found 50.97 "
                                     "GiB free a GPU after its warm-up (an idle MI300X: "
                                     "183.4): the workshop VM's GPUs were shared",
    "vllm-vllmrouter-gpt-oss-20b-abliterated-gb10-gmu025": "1.4-1.9 GiB of host memory that "
                                                           "vLLM counts as non-torch on "
                                                           "unified memory (MemAvailable); "
                                                           "no line sizes it",
    "vllm-i5248-deepseek-coder-67b-2xt4-tp2": "1.26 GiB a T4 more than kvplan's profile of "
                                              "0.4.3 (weights 6.33 GiB, a 65,536-token "
                                              "batch of 3.52 GiB: max_model_len from the "
                                              "linear rope factor 4) not identified; the "
                                              "comment prints no profile line",
    "vllm-dgxspark-gemma-4-26b-a4b-awq-int4-gb10": "the checkpoint's config (16.01 GiB on "
                                                   "disk, 1.68 over kvplan's AWQ tensors) is "
                                                   "not public here; 2.5 GiB of host memory "
                                                   "counted as non-torch on unified memory",
}


def arguments(entry: dict[str, Any]) -> list[str]:
    """`kvplan plan`'s arguments for an entry: MODEL where given, the line, the post's flags."""
    model = [entry["model"]] if entry.get("model") else []
    return ["plan", *model, "--from-command", entry["line"], *[str(f) for f in entry["flags"]]]


@cache
def _plan(entry_id: str) -> tuple[int, Any, str]:
    entry = next(e for e in ENTRIES if e["id"] == entry_id)
    # a fixture path (MODEL, or an @FILE line) from the repository root, wherever the tests run
    args = [str(ROOT / a) if a == entry.get("model") and "/" in a else
            "@" + str(ROOT / a[1:]) if a == entry["line"] and a.startswith("@") else a
            for a in arguments(entry)]
    result = runner.invoke(app, [*args, "--format", "json"])
    figure = None
    if result.exit_code in (0, 1) and result.stdout.lstrip().startswith("{"):
        numbers = json.loads(result.stdout)["engine"]
        stage = entry["logged"].get("stage")
        # a figure one pipeline stage's worker logged: that stage's of kvplan's per-stage list
        figure = numbers.get(entry["logged"]["figure"]) if stage is None else \
            numbers.get(f"stage_{entry['logged']['figure']}", [None] * (stage + 1))[stage]
    return result.exit_code, figure, result.output


def plan(entry: dict[str, Any]) -> tuple[int, Any, str]:
    """(exit code, kvplan's figure for what the engine logged, output)."""
    return _plan(entry["id"])


TOKEN_FIGURES = ("kv_cache_tokens", "estimated_max_model_len", "max_total_num_tokens",
                 "max_batch_total_tokens", "kv_size")


def shown(figure: str, value: float | None) -> str:
    """A logged or planned figure as the engine prints it."""
    if value is None:
        return "-"
    if figure in TOKEN_FIGURES:
        return f"{value:,.0f} tokens"
    if figure == "num_blocks":
        return f"{value:,.0f} blocks"
    if figure == "available_kv_cache_bytes":
        return f"{value / 2**30:.2f} GiB"
    return f"{value / 2**20:,.2f} MiB"


def corpus_table() -> str:
    """docs/engine-accuracy.md section 9: each line's logged figure, kvplan's, and the command."""
    rows = ["| line | engine | logged | kvplan | off |", "| --- | --- | ---: | ---: | ---: |"]
    commands = []
    parsed = within = 0
    for entry in ENTRIES:
        code, figure, _ = plan(entry)
        parsed += code in (0, 1) and figure is not None
        within += figure is not None and \
            abs(figure - entry["logged"]["value"]) <= 0.05 * entry["logged"]["value"]
        key, logged = entry["logged"]["figure"], entry["logged"]["value"]
        off = "-" if figure is None else f"{(figure - logged) / logged * 100:+.1f}%"
        engine = f"{entry['engine']} {entry.get('version') or ''}".strip()
        rows.append(f"| [{entry['id']}]({entry['url']}) | {engine} | {shown(key, logged)} | "
                    f"{shown(key, figure)} | {off} |")
        commands.append(f"- {entry['id']}: `kvplan {shlex.join(arguments(entry))}`")
    counts = f"{len(ENTRIES)} launch lines: {parsed} parse, {within} within 5% of what the " \
        "engine logged.\n\n"
    return counts + "\n".join(rows) + "\n\nThe command behind each row (from the repository " \
        "root):\n\n" + "\n".join(commands) + "\n"


def test_corpus_entries_are_complete_and_sourced():
    assert len({e["id"] for e in ENTRIES}) == len(ENTRIES)
    for entry in ENTRIES:
        assert entry["url"].startswith("https://"), entry["id"]
        assert entry["engine"] in ("vllm", "sglang", "llamacpp", "trtllm", "tgi", "ollama"), \
            entry["id"]
        assert isinstance(entry["logged"]["value"], int) and entry["logged"]["value"] > 0
        assert entry["why"].strip(), entry["id"]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_every_real_launch_line_parses(entry):
    code, figure, output = plan(entry)
    assert code in (0, 1), output
    assert figure is not None, f"{entry['id']}: no {entry['logged']['figure']} in the plan"


def test_launch_corpus_counts(capsys):
    parsed = within = 0
    for entry in ENTRIES:
        code, figure, _ = plan(entry)
        parsed += code in (0, 1) and figure is not None
        logged = entry["logged"]["value"]
        close = figure is not None and abs(figure - logged) <= 0.05 * logged
        within += close
        if entry["id"] in KNOWN_MISSES:
            assert not close, f"{entry['id']} is within 5% now: take it off KNOWN_MISSES"
        else:
            assert close, f"{entry['id']}: kvplan {figure}, logged {logged} (not a known miss)"
    with capsys.disabled():
        print(f"\n{parsed} of {len(ENTRIES)} launch lines parsed; {within} within 5% of the "
              "logged KV figure")
    assert parsed == len(ENTRIES)


def test_every_known_miss_is_explained_in_the_accuracy_doc():
    doc = (ROOT / "docs" / "engine-accuracy.md").read_text()
    section = doc[doc.index("## 9. Real launch lines"):doc.index("## 10.")]
    explained = section[section.index("What the misses need"):]
    assert set(KNOWN_MISSES) <= {e["id"] for e in ENTRIES}
    for entry_id in KNOWN_MISSES:
        assert f"`{entry_id}`" in explained, f"{entry_id}: not explained in section 9"


def test_accuracy_doc_holds_the_corpus_table():
    assert_in_accuracy_doc(corpus_table(), __file__)


if __name__ == "__main__":
    print(corpus_table())
