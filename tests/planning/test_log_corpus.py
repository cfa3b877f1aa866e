"""`kvplan explain` over the corpus of real start-up logs (tests/fixtures/logs/index.yaml).

Each log is read as published; `explain` is told only what the excerpt does not print (the
model as kvplan names it, and the TP size or KV dtype where the excerpt lacks them). Two counts:
- recomputed exactly from the logged budget: every KV line the log prints (tokens, blocks,
  concurrency, K/V sizes, llama.cpp's MiB) is what kvplan computes from the budget the log
  prints, within the log's own printed precision;
- within the bar from settings: the budget kvplan predicts from the GPU and the settings
  alone (where the log prints the GPU's total or its source names the GPU) is within 5% of
  the logged budget, 2% for vLLM V1 (a budget printed as V1's 'Available KV cache memory').
  A budget outside its bar is a miss where the log prints every setting that decides it;
  where it does not, the table names the settings it lacks (explain's `unprinted`: the
  setting rows' `budget` engines, and the release) instead of counting a miss.

A log that prints no KV budget (a token count only, TGI's batch total, V1 of 0.8.5) or whose
excerpt has nothing kvplan can recompute is counted among the corpus but not in the first
count's denominator.

`python tests/planning/test_log_corpus.py` prints the table docs/engine-accuracy.md holds.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/

from accuracy_doc import assert_in_accuracy_doc  # noqa: E402
from paths import FIXTURES, ROOT  # noqa: E402

from kvplan.core.errors import KvplanError  # noqa: E402
from kvplan.planning.explain import explain  # noqa: E402

CORPUS = FIXTURES / "logs"
INDEX = yaml.safe_load((CORPUS / "index.yaml").read_text(encoding="utf-8"))
LOGS = {e["id"]: e for e in INDEX["logs"]}
REPO = ROOT
# the floor the corpus reaches today (145 of the 151 logs that print a KV line; the six that
# differ are named in docs/engine-accuracy.md): a change that recomputes fewer fails
EXACT_FLOOR = 145
MIN_LOGS = 60
# issue 23's bar: at least 95% of the logs that print a KV line recomputed exactly
EXACT_SHARE = 0.95
# the from-settings bars of issue 23: 5%, and 2% for vLLM V1's budget
SETTINGS_BAR = 5.0
SETTINGS_BAR_V1 = 2.0


def _run(entry: dict):
    text = (CORPUS / entry["file"]).read_text(encoding="utf-8")
    given = dict(entry.get("explain") or {})
    model = given.get("model")
    if model and "/" in model and (REPO / model).exists():
        model = str(REPO / model)
    return explain(text, model=model, tp=given.get("tp"), kv_dtype=given.get("kv_dtype"),
                   engine=given.get("engine"), gpu=given.get("gpu"),
                   engine_version=given.get("engine_version"),
                   draft_layers=given.get("draft_layers"))


def outcome(entry: dict) -> dict:
    """What explain made of one log: 'exact' (every KV line recomputed from the logged budget
    agrees), 'diff' (one does not), 'none' (no KV line recomputed) or 'error: ...'; and the
    from-settings budget's difference where there is one."""
    try:
        result = _run(entry)
    except KvplanError as exc:  # an unknown model or an unreachable hub as well: a row, not a crash
        return {"status": f"error: {exc.message}", "settings_diff": None, "rows": ()}
    checked = [r for r in result.rows if r.basis == "given the logged budget"]
    if not checked:
        status = "none"
    else:
        status = "exact" if all(r.status == "ok" for r in checked) else "diff"
    budget = next((r for r in result.rows if r.quantity == "KV budget"), None)
    v1 = (result.engine == "vllm" and budget is not None
          and "vailable KV cache memory" in budget.line)
    return {"status": status, "settings_diff": None if budget is None else budget.diff_percent,
            "bar": SETTINGS_BAR_V1 if v1 else SETTINGS_BAR, "unprinted": result.unprinted,
            "rows": tuple(checked), "version": result.version}


def counts() -> dict:
    results = {i: outcome(e) for i, e in LOGS.items()}
    # a layout chosen to fit a log's own figures proves nothing about recomputing them
    counted = [r for i, r in results.items() if not LOGS[i].get("model_assumed")]
    exact = sum(r["status"] == "exact" for r in counted)
    with_line = sum(r["status"] in ("exact", "diff") for r in counted)
    predicted = [r for r in results.values() if r["settings_diff"] is not None]
    within = sum(abs(r["settings_diff"]) <= r["bar"] for r in predicted)
    unprinted = sum(abs(r["settings_diff"]) > r["bar"] and bool(r["unprinted"])
                    for r in predicted)
    return {"results": results, "exact": exact, "total": len(counted), "with_line": with_line,
            "assumed": len(results) - len(counted),
            "within": within, "predicted": len(predicted), "unprinted": unprinted,
            "missed": len(predicted) - within - unprinted}


def summary(c: dict) -> str:
    return (f"{c['exact']} of {c['with_line']} logs that print a KV line recomputed exactly "
            f"from the logged budget ({c['total']} logs; {c['total'] - c['with_line']} print "
            f"no KV line beyond the budget; {c['assumed']} more name no model and are "
            f"explained on an assumed layout, not counted); {c['within']} of "
            f"{c['predicted']} budgets within their bar from settings (5%; 2% for vLLM V1), "
            f"{c['missed']} outside it with "
            f"every setting that decides it printed, {c['unprinted']} outside it from a log "
            f"that lacks a setting that decides it (named in the table)")


def corpus_table(c: dict | None = None) -> str:
    c = c or counts()
    lines = ["| log | engine | release | recomputed from the logged budget | "
             "budget from settings (bar) |", "|---|---|---|---|---|"]
    for i, entry in sorted(LOGS.items(), key=lambda kv: (kv[1]["engine"], kv[0])):
        r = c["results"][i]
        diff = "-" if r["settings_diff"] is None else \
            f"{r['settings_diff']:+.1f}% ({r['bar']:.0f}%)"
        if r["settings_diff"] is not None and abs(r["settings_diff"]) > r["bar"] \
                and r["unprinted"]:
            diff += f"; not printed: {', '.join(r['unprinted'])}"
        status = r["status"].split(":")[0]
        if entry.get("model_assumed"):
            status += " (assumed model, not counted)"
        lines.append(f"| {i} | {entry['engine']} | {entry.get('release') or '-'} | {status} | "
                     f"{diff} |")
    lines.append("")
    lines.append(summary(c) + ".")
    return "\n".join(lines)


def test_the_corpus_is_real_and_cited():
    assert len(LOGS) >= MIN_LOGS
    for i, entry in LOGS.items():
        assert entry["source"], i
        assert (CORPUS / entry["file"]).is_file(), i
        assert entry["file"].startswith(f"{entry['file'].split('/')[0]}/{i}"), i


def test_the_doc_counts_the_linked_and_the_unnamed_sources():
    # docs/engine-accuracy.md §8 says how many entries link their source and how many name a
    # public copy whose repository the search tools did not name; held to the index
    unnamed = sum(1 for e in LOGS.values()
                  if re.search(r"(do|does|did) not name", " ".join(str(e["source"]).split())))
    linked = sum(1 for e in LOGS.values() if re.search(r"https?://", str(e["source"])))
    assert linked + unnamed == len(LOGS)
    doc = " ".join((ROOT / "docs" / "engine-accuracy.md").read_text(encoding="utf-8").split())
    assert (f"name the repository: {linked} of the {len(LOGS)} entries. The other {unnamed} "
            f"were found verbatim") in doc


def test_corpus_counts():
    c = counts()
    print(summary(c))
    assert c["exact"] >= EXACT_FLOOR, summary(c)
    assert c["exact"] >= EXACT_SHARE * c["with_line"], summary(c)


def test_accuracy_doc_is_current():
    assert_in_accuracy_doc(corpus_table(), __file__)


if __name__ == "__main__":
    print(corpus_table())
