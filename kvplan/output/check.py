"""`kvplan check` results shown: the pass/fail View, the JUnit XML file and the GitHub step
summary (kvplan.planning.check computes the results; the human strings are made here)."""

from __future__ import annotations

from typing import Any

from kvplan.output.render import Column, Table, View, human_bytes, render
from kvplan.planning.check import (
    RESULT_SCHEMA,
    SCHEMA,
    CheckResult,
    DeploymentSummary,
    RequirementResult,
)


def describe(r: RequirementResult) -> str:
    """What is measured, in a few words: 'requests @ 32,768 tokens'."""
    if r.kind == "engine_starts":
        return "tokens the engine admits (max_model_len)"
    if r.kind == "min_concurrency":
        return f"requests @ {r.context_tokens:,} tokens"
    if r.kind == "min_context":
        return f"tokens @ {r.concurrency:,} requests"
    if r.kind == "max_kv_bytes_per_request":
        return f"KV per request @ {r.context_tokens:,} tokens"
    return f"headroom of workload {r.workload}"


def _amount(value: Any, unit: str, units: str) -> str:
    if unit == "bytes":
        return human_bytes(int(value), units)
    if unit == "percent":
        return f"{value:,.1f}%"
    return f"{value:,}"


def _required(r: RequirementResult, units: str) -> str:
    return ("<= " if r.unit == "bytes" else ">= ") + _amount(r.required, r.unit, units)


def _margin(r: RequirementResult, units: str) -> str:
    if r.unit == "percent":
        return f"{r.margin:+,.1f} pts"
    text = f"{r.margin:+,}" if r.unit != "bytes" else \
        ("+" if r.margin >= 0 else "") + _amount(r.margin, r.unit, units)
    return text + (f" ({r.margin / r.required:+.1%})" if r.required else "")


def _fields(r: RequirementResult | DeploymentSummary) -> dict[str, Any]:
    """A result row's fields as a dict: what dataclasses.asdict gives for these flat records
    (numbers and text only), without its deep copy of every value."""
    return {name: getattr(r, name) for name in r.__dataclass_fields__}


def check_view(result: CheckResult, units: str = "iec") -> View:
    """A View: the pass/fail table, the deployments, and what each figure means."""
    from kvplan import __version__

    rows = tuple({
        "deployment": r.deployment, "kind": r.kind, "requirement": describe(r),
        "required": _required(r, units),
        "measured": _amount(r.measured, r.unit, units), "margin": _margin(r, units),
        "result": "pass" if r.passed else "FAIL", "line": r.line,
        "limited_by": r.limited_by or "-"} for r in result.results)
    failed = result.num_failed
    title = (f"{result.path}: all {len(rows)} requirements met" if not failed else
             f"{result.path}: {failed} of {len(rows)} requirements not met")
    checks = Table(title, (
        Column("deployment", "deployment"), Column("requirement", "measured quantity"),
        Column("required", "required"), Column("measured", "measured"),
        Column("margin", "margin"), Column("result", "result"),
        Column("limited_by", "limited by"), Column("line", "line", "int")), rows)
    deps = Table("Deployments", (
        Column("name", "deployment"), Column("model", "model"), Column("gpu", "GPU"),
        Column("num_gpus", "GPUs", "int"), Column("engine", "engine"),
        Column("kv_dtype", "KV dtype"), Column("max_model_len", "max length", "int"),
        Column("weights_per_gpu_bytes", "weights/GPU", "bytes"),
        Column("kv_budget_bytes", "KV budget/GPU", "bytes")),
        tuple(_fields(d) for d in result.deployments))
    raw = [_fields(r) for r in result.results]
    payload = {"schema": RESULT_SCHEMA, "kvplan_version": __version__, "plan": result.path,
               "plan_schema": SCHEMA, "passed": result.passed, "num_requirements": len(raw),
               "num_failed": failed, "deployments": [_fields(d) for d in result.deployments],
               "results": raw}
    csv_keys = tuple(RequirementResult.__dataclass_fields__)
    csv_table = Table("check", tuple(Column(k, k) for k in csv_keys), tuple(raw))
    notes = [
        f"Inputs: the plan file {result.path} (schema {SCHEMA}); each deployment's capacity "
        "as `kvplan plan` computes it (the engine's KV budget per GPU, requests rounded up to "
        "whole blocks, vLLM's null block kept aside).",
        "Formula: margin = measured - required (for a maximum: required - measured); a "
        "requirement passes when its margin is >= 0. Requests: whole requests of the context "
        "that fit at once; tokens: the longest context every one of N requests can have; "
        "KV per request: the whole model's exact KV bytes for one request (one copy) in the "
        "engine's KV format; headroom: how many times the workload fits, minus 1, in %.",
    ]
    return View([checks, deps], payload, csv_table, notes)


def junit_xml(result: CheckResult | None, error: str | None = None,
              path: str = "plan") -> str:
    """A JUnit XML report: one test case per requirement (a failure when it is not met), or
    one erroring case when the plan file could not be checked. No timestamps: the same plan
    gives the same file."""
    import xml.etree.ElementTree as ET

    name = result.path if result is not None else path
    suites = ET.Element("testsuites", name="kvplan check")
    suite = ET.SubElement(suites, "testsuite", name=name)
    cases = 0
    failures = 0
    if result is None:
        case = ET.SubElement(suite, "testcase", classname="kvplan.check", name="plan file",
                             time="0")
        ET.SubElement(case, "error", message=error or "invalid plan file",
                      type="InvalidPlan").text = error
        cases = 1
    else:
        for r in result.results:
            cases += 1
            case = ET.SubElement(suite, "testcase", classname=f"kvplan.check.{r.deployment}",
                                 name=f"{r.kind}: {describe(r)} {_required(r, 'iec')}",
                                 time="0")
            detail = (f"required {_required(r, 'iec')}, measured "
                      f"{_amount(r.measured, r.unit, 'iec')}, margin {_margin(r, 'iec')}"
                      + (f" (limited by {r.limited_by})" if r.limited_by else "")
                      + f"; {name} line {r.line}")
            if r.passed:
                ET.SubElement(case, "system-out").text = detail
            else:
                failures += 1
                ET.SubElement(case, "failure", message=detail,
                              type="RequirementNotMet").text = detail
    errors = 1 if result is None else 0
    for element in (suites, suite):
        element.set("tests", str(cases))
        element.set("failures", str(failures))
        element.set("errors", str(errors))
    suite.set("skipped", "0")
    suite.set("time", "0")
    ET.indent(suites)
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            + ET.tostring(suites, encoding="unicode") + "\n")


def step_summary(result: CheckResult | None, error: str | None = None,
                 units: str = "iec", view: View | None = None) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY: a headline, then the check's Markdown table
    (`view`: check_view(result, units), when the caller has it already)."""
    if result is None:
        return f"### kvplan check: invalid plan file\n\n```\n{error}\n```\n\n"
    mark = "passed" if result.passed else "failed"
    head = (f"### kvplan check {mark}: {len(result.results) - result.num_failed} of "
            f"{len(result.results)} requirements met\n\n")
    return head + render(view or check_view(result, units), "markdown", units) + "\n"

