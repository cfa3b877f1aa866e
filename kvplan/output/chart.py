"""Charts: KV memory against context length (several models or KV dtypes, with the KV budget
each GPU leaves after the weights as horizontal lines), and concurrency against context for
deployments.

The data is built here as frozen dataclasses of raw ints (`memory_chart`,
`concurrency_chart`); only `draw` imports matplotlib (the `kvplan[plot]` extra), inside the
function, with the Agg canvas and fixed metadata so the same chart gives the same file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from kvplan.core.errors import BadInputError, KvplanError
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.planning.plan import Deployment

# kvplan is not on PyPI: the plot extra's own requirement, which pip installs anywhere
INSTALL_HINT = "pip install 'matplotlib>=3.8'"
FORMATS = ("png", "svg")
FIGSIZE_IN = (8.0, 4.5)
PNG_DPI = 150  # 1200 x 675 pixels
SVG_HASHSALT = "kvplan"  # matplotlib's SVG ids are random unless salted


@record
class Series:
    label: str
    tokens: tuple[int, ...]  # x: context length per request
    values: tuple[int, ...]  # y: bytes (memory charts) or requests (concurrency charts)


@record
class Level:
    """A horizontal line: the KV bytes one GPU has for the cache."""

    label: str
    value_bytes: int


@record
class Chart:
    kind: str  # "memory" | "concurrency"
    title: str
    series: tuple[Series, ...]
    levels: tuple[Level, ...] = ()


# --- the data -------------------------------------------------------------------------------

def memory_chart(specs: Sequence[ModelSpec], kv_dtypes: Sequence[str], tokens: Sequence[int],
                 batches: Sequence[int] = (1,), tp: int = 1, pp: int = 1,
                 deployments: Sequence[Deployment] = ()) -> tuple[Chart, list[str]]:
    """KV bytes on the fullest GPU for `batch` requests of each length (each model up to its
    maximum context), one series per model x KV dtype x batch; one level per deployment (its
    engine's KV budget per GPU). Returns the chart and warnings (levels that could not be
    computed)."""
    from kvplan.core.dtypes import parse_format
    from kvplan.core.sizing import size

    series, warnings = [], []
    many = len(specs) > 1
    for spec in specs:
        lengths = [n for n in tokens if not spec.max_context_tokens
                   or n <= spec.max_context_tokens]
        if not lengths:
            continue
        for dtype in kv_dtypes:
            fmt = parse_format(dtype, spec.dtype)
            for batch in batches:
                values = tuple(size(spec, fmt, tokens=n, batch=batch, tp=tp, pp=pp,
                                    max_len=max(lengths)).per_gpu_batch_bytes
                               for n in lengths)
                label = ", ".join(p for p in (spec.name if many else "", fmt.name,
                                              f"batch {batch}" if len(batches) > 1 else "")
                                  if p)
                series.append(Series(label, tuple(lengths), values))
    levels = []
    for dep in deployments:
        try:
            levels.append(Level(_where(dep, many), _budget(dep)))
        except KvplanError as exc:
            warnings.append(f"no KV budget line for {dep.spec.name} on {dep.gpu_name}: "
                            f"{exc.message}")
    gpus = tp * pp
    batch_text = ("batch " if len(batches) == 1 else "batches ") + \
        ", ".join(map(str, batches))
    title = (f"KV cache per GPU ({batch_text}"
             f"{f', TP {tp} x PP {pp} = {gpus} GPUs' if gpus > 1 else ''})")
    if not series:
        raise BadInputError("nothing to plot: every length is past the models' maximum context")
    return Chart("memory", title, tuple(series), tuple(levels)), warnings


def _where(dep: Deployment, with_model: bool) -> str:
    count = f"{dep.num_gpus} x " if dep.num_gpus > 1 else ""
    model = f" for {dep.spec.name}" if with_model else ""
    where = f"{count}{dep.gpu_name}: KV budget per GPU" if dep.gpu_name else "given KV budget"
    return f"{where}{model} ({dep.engine})"


def _budget(dep: Deployment) -> int:
    from kvplan.planning.plan import capacity, kv_budget_bytes

    return kv_budget_bytes(capacity(dep))


def concurrency_chart(deployments: Sequence[Deployment], tokens: Sequence[int]) -> Chart:
    """Whole requests of each length that fit at once (kvplan.planning.plan.max_concurrency), one
    series per deployment, up to its max_model_len."""
    from kvplan.planning.plan import capacity, max_concurrency

    series = []
    models = {d.spec.name for d in deployments}
    for dep in deployments:
        cap = capacity(dep)
        lengths = [n for n in tokens if n <= dep.context_limit()]
        label = ", ".join(p for p in (dep.spec.name if len(models) > 1 else "",
                                      f"{dep.num_gpus} x {dep.gpu_name}" if dep.gpu_name
                                      else "given KV budget", cap.kv_format) if p)
        series.append(Series(label, tuple(lengths), tuple(
            max_concurrency(cap, n).max_requests for n in lengths)))
    name = next(iter(models)) if len(models) == 1 else "several models"
    engines = sorted({d.engine for d in deployments})
    return Chart("concurrency", f"Requests that fit at once: {name} ({', '.join(engines)})",
                 tuple(series))


# --- drawing --------------------------------------------------------------------------------

def image_format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise BadInputError(f"cannot tell the image format of {str(path)!r}",
                            "end the file name in .png or .svg")
    return suffix


def _matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError:
        raise BadInputError(f"plotting needs matplotlib: {INSTALL_HINT}") from None
    return matplotlib


def figure(chart: Chart, units: str = "iec") -> Any:
    """The matplotlib Figure (Agg canvas, no pyplot: no GUI, no global state)."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig = Figure(figsize=FIGSIZE_IN, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    scale, unit = (2**30, "GiB") if units == "iec" else (10**9, "GB")
    for s in chart.series:
        ys = [v / scale for v in s.values] if chart.kind == "memory" else list(s.values)
        ax.plot(s.tokens, ys, marker="o", markersize=3, linewidth=1.6, label=s.label)
    for i, level in enumerate(chart.levels):
        ax.axhline(level.value_bytes / scale, linestyle="--", linewidth=1.2,
                   color=f"C{(len(chart.series) + i) % 10}",
                   label=f"{level.label}: {level.value_bytes / scale:,.1f} {unit}")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(_token_label))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("context length (tokens per request; 1k = 1,024)")
    if chart.kind == "memory":
        ax.set_ylabel(f"KV cache per GPU ({unit}, 1 {unit} = "
                      f"{'2^30' if unit == 'GiB' else '10^9'} bytes)")
    else:
        ax.set_ylabel("concurrent requests (whole requests that fit)")
    values = [v for s in chart.series for v in s.values if v > 0]
    values += [level.value_bytes for level in chart.levels]
    if values and max(values) > 100 * min(values):
        ax.set_yscale("log", base=10 if chart.kind == "memory" else 2)
        ax.yaxis.set_major_formatter(FuncFormatter(_number_label))
    ax.set_title(chart.title)
    ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
    ax.legend(fontsize="small", loc="best")
    return fig


def _token_label(x: float, _pos: int) -> str:
    n = int(round(x))
    if n >= 2**20 and n % 2**20 == 0:
        return f"{n // 2**20}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return f"{n:,}"


def _number_label(y: float, _pos: int) -> str:
    return f"{y:,.0f}" if y >= 1 else f"{y:g}"


def draw(chart: Chart, path: str | Path | BinaryIO, units: str = "iec",
         fmt: str | None = None) -> None:
    """Write the chart as PNG or SVG (by the file name, or `fmt` for an open stream).
    Deterministic: no dates or software versions in the metadata, salted SVG ids, text drawn
    as paths."""
    if fmt is None:
        assert isinstance(path, (str, Path))
        fmt = image_format(path)
    matplotlib = _matplotlib()
    fig = figure(chart, units)
    metadata: dict[str, Any] = ({"Date": None, "Creator": "kvplan"} if fmt == "svg"
                                else {"Software": "kvplan"})
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASHSALT, "svg.fonttype": "path"}):
        try:
            fig.savefig(path, format=fmt, dpi=PNG_DPI, metadata=metadata)
        except OSError as exc:
            raise BadInputError(f"cannot write {path}: {exc.strerror or exc}") from None
