"""The one deployment builder: model + GPU (or its memory) + count/TP/PP + engine settings ->
a `Deployment` (kvplan.engines.base).

`plan`, `compare`, `report`, `plot`, `whatif`, capacity-plan files (kvplan.planning.check) and
the Python front door (`kvplan.deploy`) all build their deployments here. It lives in planning,
not sources: the result is an engines type, and sources may not import engines (the layering
contract keeps them independent siblings).

Values are accepted as the CLI accepts them: a model name, path or `hf:` reference; a catalog
GPU name; token counts as `8k` or 8192; memory as `57.65GiB` or an int of bytes; the KV dtype
as a name (`fp8`, `int4:g64`) or a `KVFormat`. Error messages name each setting the way the
caller's user typed it (`spell`): `--max-model-len` on the command line, `max_model_len` in a
capacity-plan file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from kvplan.core.errors import BadInputError
from kvplan.engines.settings import MAX_GPUS  # GPUs of one kind in one instance: a row's bound

if TYPE_CHECKING:
    from kvplan.core.dtypes import KVFormat
    from kvplan.core.spec import ModelSpec
    from kvplan.engines.base import Deployment, GPULike

Spelling = Callable[[str], str]


def flag(setting: str) -> str:
    """How the command line spells a setting: max_model_len -> --max-model-len."""
    return "--" + setting.replace("_", "-")


class SettingError(BadInputError):
    """A deployment setting that cannot be used; `setting` names it (count, gpu, tp, ...), so a
    capacity-plan reader can point at the field and its line."""

    def __init__(self, setting: str, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.setting = setting




def layout(count: int | None = None, tp: int | None = None, pp: int | None = None,
           dp: int = 1, dp_attention: bool = False, spell: Spelling = flag) -> tuple[int, int]:
    """(TP, PP) from a GPU count and/or explicit sizes: GPUs = TP x PP x DP (vLLM's
    data-parallel ranks each have their own GPUs; SGLang's DP attention splits the TP group
    instead). TP defaults to what the count leaves, PP to 1."""
    from kvplan.engines.settings import BY_NAME

    if count is not None and not 1 <= count <= MAX_GPUS:
        raise SettingError("count", f"{spell('count')} must be between 1 and {MAX_GPUS:,}, "
                           f"got {count:,}")
    for setting, value in (("tp", tp), ("pp", pp), ("dp", dp)):
        # 0 is not "unset": `--tensor-parallel-size 0` is refused, not planned as TP 1; the
        # bounds are the settings' rows (kvplan.engines.settings)
        try:
            BY_NAME[setting].to_field(value, spell(setting))
        except BadInputError as exc:
            raise SettingError(setting, exc.message, exc.hint) from None
    ranks = 1 if dp_attention else dp
    pp = pp or 1
    tp = tp or ((count // (pp * ranks)) if count else 1)
    if count is not None and tp * pp * ranks != count:
        dp_part = f" x {spell('dp')} {dp}" if ranks > 1 else ""
        raise SettingError(
            "count", f"{spell('tp')} {tp} x {spell('pp')} {pp}{dp_part} = {tp * pp * ranks} "
            f"GPUs, but {spell('count')} is {count}",
            f"give {spell('count')} alone (TP = count), or {spell('tp')}/{spell('pp')}/"
            f"{spell('dp')} that multiply to it")
    return tp, pp


def tokens(value: str | int | None, setting: str, spell: Spelling = flag) -> int | None:
    """'8k' / '32768' / 8192 -> tokens (k and m are binary, as context lengths are quoted)."""
    if value is None or isinstance(value, int):
        return value
    from kvplan.core.units import parse_tokens

    return parse_tokens(value, spell(setting))


def memory(value: str | int | None, what: str = "") -> int | None:
    """'57.65GiB' / '24GB' / an int of bytes -> bytes; `what` names the flag or field."""
    from kvplan.core.units import byte_count, parse_bytes

    if value is None:
        return None
    if isinstance(value, int):
        return byte_count(value, what or "a memory size")
    return parse_bytes(value, what)


def kv_dtype_name(kv_dtype: str | KVFormat) -> str:
    """The KV dtype as a Deployment keeps it: a --kv-dtype string (a KVFormat gives its name,
    which parses back to the same format)."""
    return kv_dtype if isinstance(kv_dtype, str) else kv_dtype.name


def find_gpu(gpu: str | GPULike | None, gpu_memory: str | int | None,
             spell: Spelling = flag) -> GPULike | None:
    """A catalog GPU by name, or a GPU known only by the memory it reports."""
    if gpu is not None and gpu_memory is not None:
        raise SettingError("gpu_memory", f"{spell('gpu')} and {spell('gpu_memory')} both name "
                           "the GPU; give one")
    if gpu is not None and not isinstance(gpu, str):
        return gpu
    if gpu is not None:
        from kvplan.sources.gpus import find_gpu as catalog_gpu

        return catalog_gpu(gpu)
    if gpu_memory is not None:
        from kvplan.sources.gpus import custom_gpu

        return custom_gpu(gpu_memory if isinstance(gpu_memory, str) else f"{gpu_memory}B")
    return None


def _stage_gpus(gpu: str | GPULike | None, gpu_memory: str | int | None, pp: int | None,
                engine: str, spell: Spelling) -> list[GPULike]:
    """`--gpu a,b`: a catalog GPU per pipeline stage (empty for one GPU kind). vLLM's workers
    each size their own budget and the engine keeps the fewest blocks over them
    (kvplan.engines.vllm.budget); the other engines are planned on one GPU kind."""
    if not isinstance(gpu, str) or "," not in gpu:
        return []
    from kvplan.engines import registry

    names = [g.strip() for g in gpu.split(",")]
    if not getattr(registry.get(engine), "plans_unequal_stages", False):
        able = [registry.get(n).display_name or n for n in registry.names()
                if getattr(registry.get(n), "plans_unequal_stages", False)]
        raise SettingError("gpu", f"{spell('gpu')} {gpu!r} names a GPU per pipeline stage, "
                           f"which kvplan does not model for {engine} (only for "
                           f"{', '.join(able) or 'no engine'})",
                           f"give one GPU kind for {engine}")
    if pp is not None and pp != len(names):
        raise SettingError("gpu", f"{spell('gpu')} {gpu!r} names {len(names)} GPUs, one per "
                           f"pipeline stage, but {spell('pp')} is {pp}",
                           "give one GPU per stage")
    found = [find_gpu(name, gpu_memory, spell) for name in names]
    return [g for g in found if g is not None]


def deployment(
    model: str | ModelSpec, *,
    gpu: str | GPULike | None = None,
    gpu_memory: str | int | None = None,
    count: int | None = None,
    tp: int | None = None,
    pp: int | None = None,
    engine: str | None = None,
    engine_version: str | None = None,
    kv_dtype: str | KVFormat = "auto",
    max_model_len: str | int | None = None,
    weights_dtype: str = "auto",
    weights_memory: str | int | None = None,
    dp: int = 1,
    assume_standard_attention: bool = False,
    spell: Spelling = flag,
    **settings: Any,
) -> Deployment:
    """Build the Deployment every capacity question starts from.

    model: a library name, a path, `hf:org/name[@rev]`, or a ModelSpec. gpu: a catalog name
    (`h100`) or a GPU object, or catalog names joined by commas, one GPU per pipeline stage
    (`rtx-5070-ti,rtx-5090`: vLLM only, PP defaults to their number); gpu_memory: what an
    uncatalogued GPU reports (`24GiB`). count, tp, pp, dp: GPUs and their split (TP defaults
    to count / (PP x DP)). assume_standard_attention: read a config.json kvplan would refuse
    as standard attention (the spec's `warnings` say so). engine: a registered engine name
    (default vLLM). weights_memory: the whole model's measured weights. `settings`: the engine
    settings by their declared names (kvplan.engines.settings: block_size, kv_memory=
    "57.65GiB", gpu_memory_utilization, dp_attention, enforce_eager, ...), each read and
    bounded by its row; other Deployment fields pass through as they are (dcp, hf_cache,
    pp_layers, ...).
    """
    from kvplan.engines.base import Deployment
    from kvplan.engines.registry import DEFAULT
    from kvplan.engines.registry import get as get_engine
    from kvplan.engines.settings import BY_NAME

    engine = engine or DEFAULT
    get_engine(engine)  # an unknown name is an error listing the registered engines
    known = {f.name for f in fields(Deployment)}
    unknown = sorted(set(settings) - known - set(BY_NAME))
    if unknown:
        raise BadInputError(f"unknown deployment setting(s): {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for name in [n for n in settings if n in BY_NAME]:
        row = BY_NAME[name]
        try:
            values[row.field_name] = row.to_field(settings.pop(name),
                                                  row.flag if spell is flag else spell(name))
        except BadInputError as exc:
            raise SettingError(name, exc.message, exc.hint) from None
    values.update(settings)  # Deployment fields given as they are
    stage_gpus = _stage_gpus(gpu, gpu_memory, pp, engine, spell)
    if stage_gpus:
        gpu, pp = stage_gpus[0], len(stage_gpus)
    tp_, pp_ = layout(count, tp, pp, dp, bool(values.get("dp_attention")), spell)
    max_len = tokens(max_model_len, "max_model_len", spell)
    weights_bytes = memory(weights_memory, spell("weights_memory"))
    if gpu is not None and gpu_memory is not None:
        find_gpu(gpu, gpu_memory, spell)  # the conflict, before the model is read
    if isinstance(model, str):
        from kvplan.sources.library import resolve

        spec = resolve(model, assume_standard_attention)
    else:
        spec = model
    if max_len is None:  # the engine's own reading of the config (vLLM: the rope factor)
        derived = getattr(get_engine(engine), "model_max_len", None)
        most = derived(spec) if derived is not None else None
        if most and most != spec.max_context_tokens:
            max_len = most
    found = find_gpu(gpu, gpu_memory, spell)
    if stage_gpus:
        values["stage_gpu_memory_bytes"] = tuple(g.memory_bytes for g in stage_gpus)
        values["stage_gpu_names"] = tuple(g.name for g in stage_gpus)
    if values.get("pp_layers") is not None:
        if not getattr(get_engine(engine), "plans_unequal_stages", False):
            raise SettingError("pp", f"a layer count per pipeline stage (vLLM's "
                               f"VLLM_PP_LAYER_PARTITION) is not modelled for {engine}")
        from kvplan.core.sizing import pp_stages

        pp_stages(spec.num_layers, pp_, values["pp_layers"])  # one count a stage, all layers
    dep = Deployment(
        spec=spec, tp=tp_, pp=pp_, engine=engine, engine_version=engine_version,
        kv_dtype=kv_dtype_name(kv_dtype), weights_dtype=weights_dtype, dp=dp,
        max_model_len=max_len, weights_bytes=weights_bytes,
        **{k: v for k, v in values.items() if v is not None})
    return dep.with_gpu(found) if found is not None else dep
