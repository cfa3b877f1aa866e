"""Whether an engine starts with a deployment, and whether a target then fits: the one verdict
that `plan`, `compare`, `check` and the front door (kvplan.api) give.

An engine refuses to start in three ways kvplan models, each the engine's own rule: a
max_model_len beyond the model's context (the engine's `longer_context_env`: vLLM
`vllm/config/model.py::_get_and_verify_max_len`, SGLang
`srt/configs/model_config.py::ModelConfig._derive_context_length`; llama.cpp only warns); no
memory left for the KV cache (`NoKVMemoryError`); the engine's start-up check on its capacity
(`Engine.start_check`, e.g. vLLM `vllm/v1/core/kv_cache_utils.py::check_enough_kv_cache_memory`).
Exit codes follow (kvplan.core.errors): 1 when the engine would not start or the target does
not fit, whatever the command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.core.errors import NoKVMemoryError
from kvplan.core.record import record

if TYPE_CHECKING:
    from kvplan.engines.base import Capacity, Deployment
    from kvplan.planning.plan import Target


@record
class Start:
    """Whether the engine starts, why not, and the budget terms of one GPU (bytes).

    capacity is None when no memory is left for the KV cache (nothing else can be measured).
    memory_bytes: what the engine's budget starts from (the GPU's reported memory, SGLang's
    free memory); weights_bytes: the weights on the fullest GPU; kv_cache_bytes: what is left
    for the KV cache (zero or less when nothing is). None where the engine has no such term
    (a measured --kv-memory, llama.cpp without a GPU)."""

    starts: bool
    reason: str  # why it would not start ("" when it starts), without the engine's name
    limited_by: str  # "" | "max_model_len" | "memory" | the budget's message
    capacity: Capacity | None
    max_request_tokens: int  # the longest request it would admit (0: none)
    hint: str = ""
    memory_bytes: int | None = None
    weights_bytes: int | None = None
    kv_cache_bytes: int | None = None
    deployment: Deployment | None = None  # what was asked (set by engine_start)

    def budget_terms(self) -> dict[str, int | None]:
        return {"memory_bytes": self.memory_bytes, "weights_bytes": self.weights_bytes,
                "kv_cache_bytes": self.kv_cache_bytes}


def longer_context_refusal(dep: Deployment) -> tuple[str, str] | None:
    """(reason, hint) when the engine refuses a max_model_len beyond the model's maximum
    context; None when it is within it, or the engine starts anyway."""
    from kvplan.engines.registry import get as get_engine

    engine = get_engine(dep.engine)
    most = engine.model_max_len(dep.spec) if hasattr(engine, "model_max_len") else \
        dep.spec.max_context_tokens
    if not dep.max_model_len or not most or dep.max_model_len <= most:
        return None
    env = getattr(engine, "longer_context_env", None)
    if not env:
        return None
    label = getattr(engine, "display_name", "") or dep.engine
    return (f"max_model_len {dep.max_model_len:,} is more than {dep.spec.name}'s maximum "
            f"context of {most:,} tokens",
            f"lower max_model_len to at most {most:,}, or start {label} with {env}=1")


def engine_start(dep: Deployment, built: Capacity | NoKVMemoryError | None = None) -> Start:
    """Whether `dep`'s engine starts, with its capacity when there is one. Settings no engine
    accepts (a block size it has not, a bad layout) raise BadInputError, as capacity() does.
    `built`: the capacity (or the NoKVMemoryError) already built for `dep` (a plan file builds
    each distinct deployment once), not built again."""
    from dataclasses import replace

    return replace(_start(dep, built), deployment=dep)


def _start(dep: Deployment, built: Capacity | NoKVMemoryError | None) -> Start:
    from kvplan.planning.plan import capacity, kv_budget_bytes

    longer = longer_context_refusal(dep)
    try:
        if isinstance(built, NoKVMemoryError):
            raise built
        cap = built if built is not None else capacity(dep)
    except NoKVMemoryError as exc:
        reason, hint = longer or (exc.message, exc.hint or "")
        return Start(False, reason, "max_model_len" if longer else exc.message, None,
                     dep.spec.max_context_tokens or 0 if longer else 0, hint,
                     exc.memory_bytes, exc.weights_bytes, exc.left_bytes)
    terms = _terms(cap, kv_budget_bytes(cap))
    if longer is not None:
        return Start(False, longer[0], "max_model_len", cap, dep.spec.max_context_tokens or 0,
                     longer[1], *terms)
    check = cap.engine.start_check(cap)
    if not check.starts:
        reason = check.reason or (
            f"one request of max_model_len {dep.context_limit():,} does not fit; the "
            f"estimated maximum is {check.max_request_tokens:,}")
        hint = check.hint or (f"lower max_model_len to at most {check.max_request_tokens:,}, "
                              "or give the KV cache more memory")
        return Start(False, reason, "memory", cap, check.max_request_tokens, hint, *terms)
    return Start(True, "", "", cap, check.max_request_tokens, "", *terms)


def _terms(cap: Capacity, kv_bytes: int) -> tuple[int | None, int | None, int]:
    """(memory, weights, KV) of the fullest GPU: the estimated budget's own terms, else the
    GPU's reported memory and the weights the engine places (llama.cpp, a measured budget)."""
    budget = cap.budget
    if budget is not None and budget.method == "estimated":
        return budget.total_memory_bytes, max(budget.weights_bytes), kv_bytes
    return cap.deployment.gpu_memory_bytes, cap.weights_per_gpu_bytes or None, kv_bytes


@record
class Verdict:
    """The answer to "does this deployment serve this target": fits = the engine starts and
    the target is met (without a target: one request of max_model_len fits at once)."""

    fits: bool
    engine_starts: bool
    reason: str  # "" when it fits


def impossible_target(dep: Deployment, context_tokens: int | None,
                      longest_request: int | None) -> tuple[str, str, str] | None:
    """(what, problem, hint) for a target no setting of this deployment could meet: a request
    longer than its max_model_len is never admitted. Bad input (exit 2), not a failure, in
    `plan`, in `check` (at the field's line) and in the front door."""
    limit = dep.context_limit()
    if context_tokens is not None and context_tokens > limit:
        return ("context", f"{context_tokens:,} tokens is longer than the deployment's "
                f"max_model_len {limit:,}: no request this long is ever admitted",
                "raise max_model_len or ask for a shorter context")
    if longest_request is not None and longest_request > limit:
        return ("workload", f"has requests of {longest_request:,} tokens, longer than "
                f"max_model_len {limit:,}: no engine would admit them",
                "raise max_model_len or shorten the requests")
    return None


def target_verdict(start: Start, target: Target) -> Verdict:
    """`start` (engine_start) against a target; Target() asks for one request of
    max_model_len. A target no setting could meet (impossible_target) is a BadInputError."""
    from kvplan.core.errors import BadInputError
    from kvplan.planning.plan import Target, max_concurrency

    dep = start.deployment
    if dep is not None:
        never = impossible_target(dep, target.context_tokens,
                                  target.workload.longest if target.workload else None)
        if never is not None:
            what, problem, hint = never
            raise BadInputError(f"the workload {problem}" if what == "workload" else problem,
                                hint)
    if not start.starts or start.capacity is None:
        return Verdict(False, False, start.reason)
    cap = start.capacity
    if target.workload is None and target.context_tokens is None and target.concurrency is None:
        target = Target(cap.deployment.context_limit())
    if target.met_by(cap):
        return Verdict(True, True, "")
    if target.workload is not None:
        from kvplan.planning.plan import check_workload

        return Verdict(False, True, check_workload(cap, target.workload).reason)
    if target.context_tokens is not None:
        c = max_concurrency(cap, target.context_tokens)
        return Verdict(False, True, f"{c.max_requests:,} request(s) of "
                       f"{target.context_tokens:,} tokens fit, {target.concurrency or 1:,} "
                       f"wanted (limited by {c.limited_by})")
    return Verdict(False, True, f"{target.concurrency:,} requests do not fit at any length")


__all__ = ["Start", "Verdict", "engine_start", "impossible_target", "longer_context_refusal",
           "target_verdict"]
