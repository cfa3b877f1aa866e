"""Capacity checks: a plan file (schema `kvplan.capacity/1`) of deployments and the
requirements each must meet, evaluated with kvplan.planning.plan.

    plan = load_plan("capacity.yaml")      # strict: errors name the file, line and field
    result = check_plan(plan)              # a CheckResult of raw ints, one row a requirement
    result.passed                          # False when any requirement is not met

The file is read once here (raw YAML never leaves this module): `yaml.compose` gives each
field's line, so an unknown key, a wrong type, a model or GPU that does not exist, or a
requirement no deployment could ever meet is reported as `capacity.yaml line 12: field
'deployments[1].gpu': unknown GPU 'h10O'`. The schema is documented in
docs/capacity-schema.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.core.errors import KvplanError, NoKVMemoryError, SpecError
from kvplan.core.record import record
from kvplan.engines.registry import get as get_engine
from kvplan.engines.settings import BY_NAME, COMMON_SETTINGS, ENGINE_SETTINGS
from kvplan.planning.plan import Deployment, Workload, weights_per_gpu
from kvplan.sources.fields import Fields

if TYPE_CHECKING:
    from kvplan.planning.plan import Capacity
    from kvplan.sources.gpus import GPU

SCHEMA = "kvplan.capacity/1"  # the plan file
RESULT_SCHEMA = "kvplan.check/1"  # what `kvplan check -f json` prints

_TOP = {"schema", "deployments", "notes"}  # and x-anything: room for YAML anchors
_DEPLOYMENT = {"name", "model", "gpu", "gpu_memory", "count", "engine", "weights_dtype",
               "weights_memory", "workload", "requires", "notes",
               *(row.name for row in COMMON_SETTINGS)}
_ENGINE = {"name", "version", *(row.name for row in ENGINE_SETTINGS)}
_WORKLOAD = {"requests", "shared_prefix", "samples"}
_REQUIRES = {"min_concurrency", "max_kv_bytes_per_request", "min_context", "headroom_percent"}
_AT = {"concurrency", "context"}
_MAX_KV = {"bytes", "context"}

# requirement kinds, in the order a deployment's rows are printed
KINDS = ("engine_starts", "min_concurrency", "min_context", "max_kv_bytes_per_request",
         "workload_headroom")


# --- the plan ------------------------------------------------------------------------------

@record
class Requirement:
    """One requirement of one deployment, as read (numbers in tokens, requests, bytes, %)."""

    kind: str  # one of KINDS (engine_starts is never written; vLLM's start-up check)
    line: int  # where it is written in the plan file
    concurrency: int | None = None
    context_tokens: int | None = None
    max_bytes: int | None = None
    headroom_percent: Fraction | None = None


@record
class PlannedDeployment:
    name: str
    line: int
    deployment: Deployment
    workload: Workload | None
    requirements: tuple[Requirement, ...]
    capacity: Any  # Capacity, or the NoKVMemoryError of an engine that would not start
    # (build_capacity), built once


@record
class CapacityPlan:
    path: str
    deployments: tuple[PlannedDeployment, ...]


# --- reading the file, with line numbers ---------------------------------------------------

class _LinedFields(Fields):
    """Fields whose errors carry the line of the field: 'plan.yaml line 7: field ...'."""

    def __init__(self, raw: Any, source: str, path: str, lines: dict[str, int]) -> None:
        self.lines = lines
        if not isinstance(raw, Mapping):
            raise SpecError(f"{source} line {self._line_of(path)}", path or None,
                            f"must be a mapping of fields, got {_type_name(raw)}")
        super().__init__(raw, source, path)

    def _line_of(self, path: str) -> int:
        while path:  # a field merged in from an anchor has no line: use its parent's
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return self.lines.get("", 1)

    def line(self, name: str | None = None) -> int:
        return self._line_of(self.where(name) if name else self.path)

    def error(self, name: str | None, problem: str, hint: str | None = None) -> SpecError:
        return SpecError(f"{self.source} line {self.line(name)}",
                         self.where(name) if name else (self.path or None), problem, hint)

    def sub(self, name: str) -> _LinedFields:
        return _LinedFields(self.raw.get(name), self.source, self.where(name), self.lines)

    def item(self, name: str, index: int, value: Any) -> _LinedFields:
        return _LinedFields(value, self.source, f"{self.where(name)}[{index}]", self.lines)

    def wrap(self, name: str | None, exc: KvplanError) -> SpecError:
        """A core error about this field's value (None: about this mapping as a whole),
        re-raised with the field's line."""
        return self.error(name, exc.message, exc.hint)


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing"
    return {"str": "text", "int": "a number", "float": "a number", "list": "a list",
            "bool": "true/false"}.get(type(value).__name__, type(value).__name__)


def _compose(path: str) -> tuple[Any, dict[str, int]]:
    """The file's data (through kvplan.sources.reader: size, depth and aliases capped) and
    the 1-based line of every field path."""
    from kvplan.sources.reader import compose_yaml, construct_yaml, read_text

    text = read_text(path, "the plan file")
    node, loader = compose_yaml(text, path)
    lines: dict[str, int] = {}
    try:
        if node is not None:
            lines[""] = node.start_mark.line + 1
            _walk(node, "", lines, path)  # before constructing: that merges `<<` keys in place
    except BaseException:
        loader.dispose()
        raise
    return construct_yaml(node, loader, path), lines


def _walk(node: Any, path: str, lines: dict[str, int], source: str) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            child = f"{path}.{key.value}" if path else str(key.value)
            if child in lines:  # PyYAML keeps the last silently; a plan must not
                raise SpecError(f"{source} line {key.start_mark.line + 1}", child,
                                f"is given twice (first on line {lines[child]})")
            lines[child] = key.start_mark.line + 1
            _walk(value, child, lines, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[f"{path}[{i}]"] = item.start_mark.line + 1
            _walk(item, f"{path}[{i}]", lines, source)


def load_plan(path: str | Path) -> CapacityPlan:
    """Read and check a plan file: every model and GPU is looked up and every requirement
    checked for sense here, so evaluation never meets a bad field."""
    source = str(path)
    data, lines = _compose(source)
    if data is None:
        raise SpecError(source, None, "is empty", f"start it with `schema: {SCHEMA}`")
    top = _LinedFields(data, source, "", lines)
    top.check_known(_TOP | {k for k in top.raw if isinstance(k, str) and k.startswith("x-")})
    schema = top.str("schema")
    if schema != SCHEMA:
        raise top.error("schema", f"is {schema!r}; this kvplan reads {SCHEMA!r}")
    items = top.list("deployments")
    if not items:
        raise top.error("deployments", "is empty", "list at least one deployment")
    base = Path(source).resolve().parent
    planned: list[PlannedDeployment] = []
    names: dict[str, int] = {}
    memo = _Memo()
    for i, item in enumerate(items):
        f = top.item("deployments", i, item)
        dep = _read_deployment(f, base, memo)
        if dep.name in names:
            raise f.error("name", f"{dep.name!r} is already the name of the deployment on "
                          f"line {names[dep.name]}")
        names[dep.name] = f.line()
        planned.append(dep)
    return CapacityPlan(source, tuple(planned))


def _tokens(f: _LinedFields, name: str, default: Any = None) -> Any:
    from kvplan.core.units import parse_tokens

    value = f.raw.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise f.error(name, f"must be a number of tokens (32768 or 32k), got {value!r}")
    try:
        return parse_tokens(value, name)
    except KvplanError as exc:
        raise f.wrap(name, exc) from None


def _common(f: _LinedFields, name: str) -> Any:
    """A setting every engine shares, given at the deployment's top (tp, pp, dp, dcp,
    max_model_len, kv_dtype), read and bounded by its row (kvplan.engines.settings) as a flag
    or a launch line is; the row's default when it is left out."""
    row = BY_NAME[name]
    value = f.raw.get(name)
    if value is None:
        return row.default
    try:
        return row.to_field(value, "")
    except KvplanError as exc:
        raise f.wrap(name, exc) from None


def _bytes(f: _LinedFields, name: str) -> int | None:
    from kvplan.core.units import byte_count, parse_bytes

    value = f.raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise f.error(name, f"must be a size such as 24GiB, got {value!r}")
    try:  # a bare whole number is bytes
        return byte_count(value) if isinstance(value, int) else parse_bytes(value)
    except KvplanError as exc:
        raise f.wrap(name, exc) from None


def _number(f: _LinedFields, name: str, low: float, high: float | None = None) -> Any:
    value = f.raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise f.error(name, f"must be a number, got {value!r}")
    if value < low or (high is not None and value > high):
        span = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise f.error(name, f"must be {span}, got {value}")
    return value


class _Memo:
    """What one plan's deployments share: each model read once (a plan of 10,000
    requirements names a few models thousands of times) and each distinct deployment's
    capacity built once."""

    def __init__(self) -> None:
        self.specs: dict[str, Any] = {}
        self.capacities: dict[Any, Any] = {}
        self.workloads: dict[tuple[str, int, int], Workload] = {}
        self.deployments: dict[Hashable, Deployment] = {}
        self.kept: set[int] = set()  # ids of the deployments above
        self.built: dict[int, Capacity | NoKVMemoryError] = {}  # their capacities, by id

    def spec(self, model: str) -> Any:
        from kvplan.sources.library import resolve

        if model not in self.specs:
            self.specs[model] = resolve(model)
        return self.specs[model]

    def capacity(self, dep: Deployment) -> Capacity | NoKVMemoryError:
        if id(dep) in self.built:  # a deployment this memo returned (deployment())
            return self.built[id(dep)]
        try:
            # one look-up: hashing a deployment hashes its whole model spec
            built = self.capacities.get(dep)
        except TypeError:  # a deployment holding something unhashable: built each time
            return build_capacity(dep)
        if built is None:
            built = self.capacities[dep] = build_capacity(dep)
        if id(dep) in self.kept:
            self.built[id(dep)] = built
        return built

    def deployment(self, spec: Any, args: dict[str, Any], build: Callable[[], Deployment]
                   ) -> Deployment:
        """The deployment of `spec` (a spec this memo read) with `args`, built once for
        each distinct set of arguments; unhashable arguments are built each time."""
        try:
            key = (id(spec), frozenset(args.items()))
            dep = self.deployments.get(key)
        except TypeError:
            return build()
        if dep is None:
            dep = self.deployments[key] = build()
            self.kept.add(id(dep))  # alive as long as this memo: its id names it
        return dep

    def workload(self, text: str, shared: int, samples: int) -> Workload:
        """The workload `text` names (a mix or a requests file), parsed once per plan."""
        from kvplan.planning.plan import parse_workload

        key = (text, shared, samples)
        if key not in self.workloads:
            self.workloads[key] = parse_workload(text, shared, samples)
        return self.workloads[key]


def _read_deployment(f: _LinedFields, base: Path, memo: _Memo | None = None
                     ) -> PlannedDeployment:
    from kvplan.planning.deployment import deployment

    memo = memo or _Memo()
    f.check_known(_DEPLOYMENT)
    name = f.str("name")
    model = f.str("model")
    local = base / model
    try:
        beside = not Path(model).is_absolute() and local.exists()
    except (OSError, ValueError):  # a name no file can have (too long, a NUL byte)
        beside = False
    try:
        spec = memo.spec(str(local) if beside else model)
    except KvplanError as exc:
        raise f.wrap("model", exc) from None
    settings = _read_engine(f)
    tp, pp, dp, dcp = _layout(f, spec, bool(settings.get("dp_attention")))
    gpu = _read_gpu(f)
    weights = _bytes(f, "weights_memory")
    needs_memory = get_engine(settings["engine"]).needs_memory
    # weights nothing can size (no tensor inventory, no parameter count): the same question
    # the engines' budgets ask (engines.base.weights_per_gpu), pointed at the model's line
    if needs_memory and weights is None and settings.get("kv_memory_bytes") is None and \
            spec.num_params is None and not weights_per_gpu(Deployment(spec)):
        from kvplan.core.weights import unsized_weights, unsized_weights_hint

        raise f.error("model", unsized_weights(spec), unsized_weights_hint(
            "`weights_memory: 15GiB`", "`engine: {kv_memory: 57.65GiB}`"))
    if gpu is None and settings.get("kv_memory_bytes") is None and needs_memory:
        raise f.error(None, "names no memory to plan with",
                      "give `gpu: h100` (a catalog GPU), `gpu_memory: 24GiB`, or the KV budget "
                      "the engine logged as `engine: {kv_memory: 57.65GiB}`")
    args = dict(gpu=gpu, tp=tp, pp=pp, dp=dp, dcp=dcp, kv_dtype=_common(f, "kv_dtype"),
                max_model_len=_common(f, "max_model_len"),
                weights_dtype=f.str("weights_dtype", "auto"), weights_memory=weights,
                **settings)
    dep = memo.deployment(spec, args, lambda: deployment(spec, spell=str, **args))
    # a max_model_len beyond the model's maximum is the engine's to refuse (or not): an
    # `engine_starts` failure, as `plan` reports it (kvplan.planning.verdict)
    try:
        cap = memo.capacity(dep)  # settings the engine rejects are errors in the file
    except KvplanError as exc:
        named = f.has("kv_dtype") and repr(dep.kv_dtype) in exc.message
        raise f.wrap("kv_dtype" if named else None, exc) from None
    workload = _read_workload(f, base, memo) if f.has("workload") else None
    requirements = _read_requires(f, dep, workload)
    return PlannedDeployment(name, f.line(), dep, workload, requirements, cap)


def _read_engine(f: _LinedFields) -> dict[str, Any]:
    from kvplan.engines import parse_version
    from kvplan.engines.registry import DEFAULT, names

    raw = f.raw.get("engine")
    if raw is None or isinstance(raw, str):
        e = _LinedFields({"name": raw or DEFAULT}, f.source, f.where("engine"), f.lines)
    else:
        e = f.sub("engine")
        e.check_known(_ENGINE)
    engine = e.str("name", DEFAULT)
    try:
        get_engine(engine)
    except KvplanError:
        raise e.error("name" if raw is not None and not isinstance(raw, str) else None,
                      f"unknown engine {engine!r}", "one of: " + ", ".join(names())) from None
    version = e.raw.get("version")
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        raise e.error("version", f"must be quoted text such as \"0.11\", got {version!r}",
                      "unquoted, YAML reads 0.10 as the number 0.1")
    version = e.str("version", None)
    try:
        parse_version(version)
    except KvplanError as exc:
        raise e.wrap("version", exc) from None
    # the engine settings, each read and bounded by its declaration (kvplan.engines.settings),
    # by the Deployment field each sets (the deployment builder takes those as they are)
    out: dict[str, Any] = {"engine": engine, "engine_version": version}
    for row in ENGINE_SETTINGS:
        value = e.raw.get(row.name)
        if value is None:
            continue
        try:
            out[row.field_name] = row.to_field(value, "")
        except KvplanError as exc:
            raise e.wrap(row.name, exc) from None
    # llama.cpp's own readers of the two settings it spells in words (on/off/auto; N/all/auto)
    if "flash_attn" in out:
        from kvplan.engines.llamacpp import flash_attn_on

        try:
            flash_attn_on(out["flash_attn"])
        except KvplanError as exc:
            raise e.wrap("flash_attn", exc) from None
    if "n_gpu_layers" in out:
        from kvplan.engines.llamacpp import gpu_layer_count

        try:
            gpu_layer_count(out["n_gpu_layers"])
        except KvplanError as exc:
            raise e.wrap("n_gpu_layers", exc) from None
    return out


def _layout(f: _LinedFields, spec: Any, dp_attention: bool = False
            ) -> tuple[int, int, int, int]:
    """tp, pp, dp, dcp; count = tp x pp x dp (SGLang's DP attention splits the TP group)."""
    from kvplan.core.sizing import check_parallelism
    from kvplan.planning.deployment import SettingError, layout

    dp, dcp = _common(f, "dp"), _common(f, "dcp")
    try:
        tp, pp = layout(f.int("count", None), _common(f, "tp"), _common(f, "pp"), dp,
                        dp_attention, spell=str)
    except SettingError as exc:
        raise f.wrap(exc.setting, exc) from None
    try:
        check_parallelism(spec, tp, pp)
    except KvplanError as exc:
        raise f.wrap("tp" if f.has("tp") else "count" if f.has("count") else "pp", exc) from None
    return tp, pp, dp, dcp


def _read_gpu(f: _LinedFields) -> GPU | None:
    from kvplan.sources.gpus import custom_gpu, find_gpu

    if f.has("gpu") and f.has("gpu_memory"):
        raise f.error("gpu_memory", "and `gpu` both name the GPU; give one")
    try:
        if f.has("gpu"):
            gpu = find_gpu(f.str("gpu"))
        elif f.has("gpu_memory"):
            gpu = custom_gpu(str(f.raw["gpu_memory"]))
        else:
            return None
    except SpecError:
        raise
    except KvplanError as exc:
        raise f.wrap("gpu" if f.has("gpu") else "gpu_memory", exc) from None
    return gpu


def _read_workload(f: _LinedFields, base: Path, memo: _Memo) -> Workload:
    raw = f.raw["workload"]
    if isinstance(raw, str):
        w = _LinedFields({"requests": raw}, f.source, f.where("workload"), f.lines)
    else:
        w = f.sub("workload")
        w.check_known(_WORKLOAD)
    text = w.str("requests")
    local = base / text
    if text.endswith((".jsonl", ".csv", ".json")) and not Path(text).is_absolute():
        text = str(local)  # a requests file is found beside the plan
    shared, samples = _tokens(w, "shared_prefix", 0), w.int("samples", 1)  # name themselves
    try:
        return memo.workload(text, shared, samples)
    except KvplanError as exc:
        raise w.wrap("requests" if isinstance(raw, Mapping) else None, exc) from None


def _read_requires(f: _LinedFields, dep: Deployment, workload: Workload | None
                   ) -> tuple[Requirement, ...]:
    out: list[Requirement] = []
    r = f.sub("requires") if f.has("requires") else None
    if r is None:
        if workload is None:
            raise f.error(None, "has nothing to check",
                          "add `requires:` (min_concurrency, min_context, "
                          "max_kv_bytes_per_request, headroom_percent) or a `workload`")
        return (Requirement("workload_headroom", f.line("workload"),
                            headroom_percent=Fraction(0)),)
    r.check_known(_REQUIRES)
    if not r.raw:
        raise r.error(None, "is empty", "give at least one requirement")
    limit = dep.context_limit()
    for kind in ("min_concurrency", "min_context"):
        if r.has(kind):
            at = r.sub(kind)
            at.check_known(_AT)
            conc, ctx = at.int("concurrency"), _tokens(at, "context")
            if ctx is None:
                raise at.error("context", "is missing", "a number of tokens, e.g. 32k")
            _possible(at, dep, ctx, limit, conc)
            out.append(Requirement(kind, at.line(), concurrency=conc, context_tokens=ctx))
    if r.has("max_kv_bytes_per_request"):
        kv = r.sub("max_kv_bytes_per_request")
        kv.check_known(_MAX_KV)
        most = _bytes(kv, "bytes")
        if most is None:
            raise kv.error("bytes", "is missing", "a size such as 2GiB")
        ctx = _tokens(kv, "context", limit)
        _possible(kv, dep, ctx, limit, None)
        out.append(Requirement("max_kv_bytes_per_request", kv.line(), context_tokens=ctx,
                               max_bytes=most))
    headroom = _number(r, "headroom_percent", 0)
    if headroom is not None and workload is None:
        raise r.error("headroom_percent", "needs a workload to measure the headroom of",
                      "add `workload: 64x(2k+512)` to this deployment")
    if workload is not None:
        from kvplan.planning.verdict import impossible_target

        never = impossible_target(dep, None, workload.longest)
        if never is not None:
            raise f.error("workload", never[1], never[2])
        out.append(Requirement("workload_headroom", r.line("headroom_percent") if headroom
                               is not None else f.line("workload"),
                               headroom_percent=Fraction(str(headroom or 0))))
    return tuple(out)


def _possible(at: _LinedFields, dep: Deployment, ctx: int, limit: int,
              concurrency: int | None) -> None:
    """A requirement longer than the deployment's own max_model_len is an error in the file,
    not a failure. More requests than the engine's request cap (vLLM max_num_seqs, llama.cpp
    --parallel, ...) is a failure, as `plan` reports it: the cap binds (`limited_by`)."""
    from kvplan.planning.verdict import impossible_target

    never = impossible_target(dep, ctx, None)
    if never is not None:
        raise at.error("context", never[1], never[2])


# --- evaluation ----------------------------------------------------------------------------

@record
class RequirementResult:
    """One row of the check: required against measured, margin >= 0 when it passes.

    unit: requests | tokens | bytes | percent. For maxima (bytes) the margin is
    required - measured; otherwise measured - required. Percent values are floats (the
    pass/fail decision itself is exact)."""

    deployment: str
    kind: str
    unit: str
    required: int | float
    measured: int | float
    margin: int | float
    passed: bool
    line: int
    context_tokens: int | None = None
    concurrency: int | None = None
    workload: str | None = None
    limited_by: str = ""


@record
class DeploymentSummary:
    name: str
    line: int
    model: str
    gpu: str | None
    num_gpus: int
    tp: int
    pp: int
    engine: str
    kv_dtype: str  # the engine's format (fp8 -> fp8_e4m3 on vLLM)
    max_model_len: int
    weights_per_gpu_bytes: int | None  # None when unknown (a measured KV budget)
    kv_budget_bytes: int  # the engine's KV pool on one GPU


@record
class CheckResult:
    path: str
    deployments: tuple[DeploymentSummary, ...]
    results: tuple[RequirementResult, ...]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def num_failed(self) -> int:
        return sum(not r.passed for r in self.results)


def build_capacity(dep: Deployment) -> Capacity | NoKVMemoryError:
    """The deployment's Capacity, or the error that says why its engine would not start: a
    plan whose weights leave no room for the KV cache is a failed check (exit 1), not a bad
    file (kvplan.planning.verdict.engine_start reads either)."""
    from kvplan.planning import plan as core

    try:
        return core.capacity(dep)
    except NoKVMemoryError as exc:
        return exc


def check_plan(plan: CapacityPlan) -> CheckResult:
    """Every requirement of every deployment, measured with kvplan.planning.plan."""
    summaries, rows = [], []
    measured: dict[Hashable, Any] = {}  # shared by deployments with one capacity
    for planned in plan.deployments:
        summary, results = check_deployment(planned, plan.path, measured)
        summaries.append(summary)
        rows.extend(results)
    return CheckResult(plan.path, tuple(summaries), tuple(rows))


def check_deployment(planned: PlannedDeployment, source: str = "plan",
                     measured: dict[Hashable, Any] | None = None
                     ) -> tuple[DeploymentSummary, list[RequirementResult]]:
    """The deployment's rows. `measured`: figures already measured for other deployments of
    the plan, by (their capacity, the question): deployments that load_plan found equal share
    one capacity object, so thousands of requirements over a few deployments measure each
    distinct question once."""
    from kvplan.core.sizing import request_bytes
    from kvplan.planning import plan as core
    from kvplan.planning.plan import kv_budget_bytes
    from kvplan.planning.verdict import engine_start

    known = {} if measured is None else measured
    built = id(planned.capacity)  # held by the plan while it is checked: never reused

    def once(question: Hashable, answer: Callable[..., Any], *args: Any) -> Any:
        key = (built, question)
        if key not in known:
            known[key] = answer(*args)
        return known[key]

    dep = planned.deployment
    # the capacity was built when the plan was read (load_plan)
    start = once("start", engine_start, dep, planned.capacity)
    row = _Rows(planned)
    if not start.starts:
        # the engine refuses to start: measured = the longest request it would admit
        est = start.max_request_tokens
        row.add("engine_starts", "tokens", dep.context_limit(), est, est - dep.context_limit(),
                planned.line, passed=False, context_tokens=dep.context_limit(),
                limited_by=start.limited_by)
    cap = start.capacity
    if cap is None:  # no memory for the KV cache: nothing else can be measured
        return DeploymentSummary(
            planned.name, planned.line, dep.spec.name, dep.gpu_name, dep.num_gpus, dep.tp,
            dep.pp, dep.engine, dep.kv_dtype, dep.context_limit(),
            core.weights_per_gpu(dep) or None, 0), row.rows
    for req in planned.requirements:
        if req.kind == "min_concurrency":
            assert req.context_tokens is not None and req.concurrency is not None
            c = once(("requests", req.context_tokens), core.max_concurrency, cap,
                     req.context_tokens)
            row.add(req.kind, "requests", req.concurrency, c.max_requests,
                    c.max_requests - req.concurrency, req.line,
                    context_tokens=req.context_tokens, concurrency=req.concurrency,
                    limited_by=c.limited_by)
        elif req.kind == "min_context":
            assert req.context_tokens is not None and req.concurrency is not None
            x = once(("tokens", req.concurrency), core.max_context, cap, req.concurrency)
            row.add(req.kind, "tokens", req.context_tokens, x.max_context_tokens,
                    x.max_context_tokens - req.context_tokens, req.line,
                    context_tokens=req.context_tokens, concurrency=req.concurrency,
                    limited_by=x.limited_by)
        elif req.kind == "max_kv_bytes_per_request":
            assert req.context_tokens is not None and req.max_bytes is not None
            # the whole model's exact bytes for one request (one copy, as `kvplan size`
            # prints "per request") in the format the engine stores
            used = once(("bytes", req.context_tokens), request_bytes, dep.spec.layers,
                        req.context_tokens, core.format_for_sizing(cap))
            row.add(req.kind, "bytes", req.max_bytes, used, req.max_bytes - used, req.line,
                    context_tokens=req.context_tokens)
        else:
            assert planned.workload is not None and req.headroom_percent is not None
            w = once(("workload", id(planned.workload)), core.check_workload, cap,
                     planned.workload)
            # max_scale: how many times the mix fits; 1.2 = 20 % headroom
            have = (w.max_scale - 1) * 100
            ok = w.fits and have >= req.headroom_percent
            row.add(req.kind, "percent", float(req.headroom_percent), round(float(have), 2),
                    round(float(have - req.headroom_percent), 2), req.line, passed=ok,
                    workload=planned.workload.source, limited_by=w.reason)
    summary = DeploymentSummary(
        planned.name, planned.line, dep.spec.name, dep.gpu_name, dep.num_gpus, dep.tp, dep.pp,
        dep.engine, cap.kv_format, dep.context_limit(), cap.weights_per_gpu_bytes or None,
        kv_budget_bytes(cap))
    return summary, row.rows


class _Rows:
    def __init__(self, planned: PlannedDeployment) -> None:
        self.name = planned.name
        self.rows: list[RequirementResult] = []

    def add(self, kind: str, unit: str, required: Any, measured: Any, margin: Any, line: int,
            passed: bool | None = None, **extra: Any) -> None:
        self.rows.append(RequirementResult(
            self.name, kind, unit, required, measured, margin,
            margin >= 0 if passed is None else passed, line, **extra))
