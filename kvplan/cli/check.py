"""`kvplan check`: a plan file's capacity requirements, for CI (registered in kvplan.cli.app).

Exit codes: 0 every requirement met, 1 any not met, 2 the plan file is invalid.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated

import typer

from kvplan.cli.options import FormatOpt, UnitsOpt, emit, handle_errors, warn


@handle_errors
def check(
    plan_file: Annotated[str, typer.Argument(
        metavar="PLAN", help="A plan file (schema kvplan.capacity/1; see "
        "docs/capacity-schema.md).", show_default=False)],
    junit: Annotated[str | None, typer.Option(
        "--junit", help="Also write a JUnit XML report here (one test case per requirement).",
        show_default=False)] = None,
    fmt: FormatOpt = "table",
    units: UnitsOpt = "iec",
) -> None:
    """Check every deployment of a plan file against its requirements: a pass/fail table with
    the measured margin. With GITHUB_STEP_SUMMARY set, a Markdown summary is appended there.

    Exit 0 when all requirements pass, 1 when any fails, 2 when the file is invalid (the
    message names the file, line and field).

    Examples:

      kvplan check docs/capacity.example.yaml

      kvplan check capacity.yaml --junit reports/capacity.xml -f markdown
    """
    from kvplan.core.errors import KvplanError
    from kvplan.output.check import check_view, junit_xml, step_summary
    from kvplan.planning import check as core

    try:
        plan = core.load_plan(plan_file)
        result = core.check_plan(plan)
    except KvplanError as exc:  # CI still gets a report naming the problem
        message = exc.message
        _write_ci(junit, lambda: junit_xml(None, message, str(plan_file)),
                  lambda: step_summary(None, message))
        raise
    # what a model's reader assumed or could not read (an MLX checkpoint's weights counted
    # unquantized), once per model, as `plan` prints it
    warn(w for p in plan.deployments for w in p.deployment.spec.warnings)
    view = check_view(result, units)
    _write_ci(junit, lambda: junit_xml(result),
              lambda: step_summary(result, units=units, view=view))
    emit(view, fmt, units)
    if not result.passed:
        typer.echo(f"kvplan: {result.num_failed} of {len(result.results)} requirements not "
                   "met (exit 1)", err=True)
        raise typer.Exit(1)


def _write_ci(junit: str | None, xml: Callable[[], str], summary: Callable[[], str]
              ) -> None:
    """The JUnit file and the step summary, each made only when it is asked for (10,000
    requirements are a second of text each)."""
    from kvplan.cli.options import write_atomic

    if junit is not None:
        write_atomic(junit, xml())
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        try:
            text = summary()
            with open(step_summary, "a", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:  # the check's own result matters more than its summary
            typer.echo(f"kvplan: warning: cannot append to GITHUB_STEP_SUMMARY "
                       f"{step_summary}: {exc.strerror or exc}", err=True)
