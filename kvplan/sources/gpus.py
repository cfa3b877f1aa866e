"""The GPU catalog (kvplan/data/gpus.yaml, schema `kvplan.gpus/1`) and GPU look-up.

`memory_bytes` is the total the device reports to the framework (torch.cuda.mem_get_info()[1]),
not the vendor's "80 GB": that is the figure an engine multiplies by its memory fraction. Every
number in the catalog carries its source; `kvplan gpus -f json` prints them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import field
from pathlib import Path
from typing import Any

from kvplan.core.errors import BadInputError, SpecError
from kvplan.core.record import record
from kvplan.sources.fields import Fields, read_yaml

SCHEMA = "kvplan.gpus/1"
LIST_SCHEMA = "kvplan.gpu-list/1"  # the JSON that `kvplan gpus -f json` prints
CATALOG_PATH = Path(__file__).resolve().parent.parent / "data" / "gpus.yaml"

# exact_bytes: printed by deviceQuery/rocm-smi; mib: torch's integer MiB; gib_2dp: a GiB figure
# with two decimals (+-5 MiB); derived: no log from that exact GPU, the rule is in its sources.
MEMORY_BASES = ("exact_bytes", "mib", "gib_2dp", "derived", "custom")
_FILE_BASES = MEMORY_BASES[:-1]  # "custom" is custom_gpu()'s, never the catalog's
REQUIRED_SOURCES = ("memory_bytes", "hbm_bandwidth_bytes_per_s")
# how the board joins its GPUs (the catalog's header says what each means); the NCCL rule of
# kvplan.engines.shared.device reads "nvswitch"
INTERCONNECTS = ("nvswitch", "nvlink-bridge", "pcie", "infinity-fabric", "network", "varies")

_TOP = {"schema", "gpus"}
_ENTRY = {"name", "display_name", "aliases", "vendor", "architecture", "compute_capability",
          "dense_flops_per_s", "memory_bytes", "memory_basis", "marketing_memory",
          "hbm_bandwidth_bytes_per_s", "fp8", "fp4", "sources", "notes", "other_memory_bytes",
          "interconnect"}


@record
class GPU:
    name: str
    memory_bytes: int  # total reported to the framework (cudaMemGetInfo / hipMemGetInfo)
    hbm_bandwidth_bytes_per_s: int  # vendor peak DRAM bandwidth; 0 when unknown (custom GPUs)
    fp8: bool
    fp4: bool
    vendor: str
    marketing_memory: str  # the vendor's figure, e.g. "80 GB HBM3" (GB = 2^30 B of DRAM)
    architecture: str = ""
    compute_capability: str | None = None  # "9.0" for NVIDIA, the gfx target for AMD
    display_name: str = ""
    aliases: tuple[str, ...] = ()
    memory_basis: str = "derived"
    sources: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    notes: str = ""
    # vendor peak dense tensor FLOP/s per math dtype ("bf16", "fp8", "fp4"); empty when unknown
    dense_flops_per_s: dict[str, int] = field(default_factory=dict, hash=False, compare=False)
    # other totals the framework has reported for this GPU on public records (another driver
    # or board): a log that does not print its total may come from any of them
    other_memory_bytes: tuple[int, ...] = ()
    interconnect: str = ""  # one of INTERCONNECTS (every catalog entry); "" for a custom GPU

    @property
    def is_custom(self) -> bool:
        return self.vendor == "custom"


# --- look-up ------------------------------------------------------------------------------

_DROP_WORDS = re.compile(r"\b(nvidia|amd|geforce|tesla|instinct)\b")
_GB_SUFFIX = re.compile(r"(\d)\s*gb\b")


def normalize(text: str) -> str:
    """'NVIDIA H100-80GB' -> 'h10080g': case, spaces, dashes, vendor words and GB/G ignored."""
    text = _DROP_WORDS.sub(" ", text.lower())
    text = _GB_SUFFIX.sub(r"\1g", text)
    return re.sub(r"[^a-z0-9]", "", text)


def gpu_id(gpu: GPU) -> str:
    """The shortest spelling `--gpu` takes for this GPU ('h100' for the H100 SXM): names and
    aliases are unique in the catalog, so any of them finds it."""
    spellings = [re.sub(r"\s+", "-", n.strip().lower()) for n in (gpu.name, *gpu.aliases)]
    worded = [n for n in spellings if re.search(r"[a-z]", n)] or spellings  # rtx-3090, not 3090
    return min(worded, key=lambda n: (len(n), n))


def _keys(gpu: GPU) -> list[str]:
    return [normalize(n) for n in (gpu.name, *gpu.aliases)]


# The catalog packaged with kvplan (fixed when the module is imported: a test or a caller that
# points CATALOG_PATH elsewhere gets the guarded reader).
_PACKAGED = str(CATALOG_PATH)


@functools.lru_cache(maxsize=4)
def _load(path: str) -> tuple[GPU, ...]:
    raw = _read_packaged() if path == _PACKAGED else read_yaml(path, "the GPU catalog")
    return tuple(catalog_from_dict(raw, path))


def _read_packaged() -> Any:
    """The packaged catalog through the plain-subset reader (kvplan.sources.plainyaml: no
    PyYAML import), else libyaml's own safe loader: the same values as the guarded reader
    (kvplan.sources.reader), without its per-node Python limit checks, which guard files a
    user hands kvplan, not the one shipped with it (2.5 ms of every `--gpu`;
    tests/sources/test_gpus.py checks that both read the same values). Without libyaml, the
    guarded reader."""
    with open(_PACKAGED, encoding="utf-8") as f:
        text = f.read()
    found, value = _load_packaged(text)
    return value if found else read_yaml(_PACKAGED, "the GPU catalog")


def _load_packaged(text: str) -> tuple[bool, Any]:
    """(read, value) of packaged catalog text: the plain-subset reader, else libyaml's safe
    loader; (False, None) without libyaml (the caller then takes the guarded reader)."""
    from kvplan.sources.plainyaml import parse

    done, value = parse(text)  # the subset kvplan's files use, without PyYAML
    if done:
        return True, value
    try:
        from yaml import CSafeLoader
    except ImportError:
        return False, None
    import yaml

    return True, yaml.load(text, Loader=CSafeLoader)  # noqa: S506 - a safe loader


def catalog_from_dict(raw: Any, source: str) -> list[GPU]:
    top = Fields(raw, source)
    top.check_known(_TOP)
    schema = top.str("schema")
    if schema != SCHEMA:
        raise top.error("schema", f"is {schema!r}; this kvplan reads {SCHEMA!r}")
    entries = top.list("gpus")
    gpus = [_read_gpu(Fields(item, source, f"gpus[{i}]")) for i, item in enumerate(entries)]
    owner: dict[str, str] = {}
    for i, gpu in enumerate(gpus):
        for key, label in zip(_keys(gpu), (gpu.name, *gpu.aliases), strict=True):
            if key in owner:
                raise SpecError(source, f"gpus[{i}]", f"name or alias {label!r} is already used "
                                f"by {owner[key]!r} (names compare without case, spaces, "
                                "dashes, 'NVIDIA'/'AMD' and the B of GB)")
            owner[key] = gpu.name
    return gpus


def _read_gpu(f: Fields) -> GPU:
    f.check_known(_ENTRY)
    for flag in ("fp8", "fp4"):
        if not f.has(flag):
            raise f.error(flag, "is missing", "write true or false")
    aliases = f.list("aliases", [])
    if not all(isinstance(a, str) and a.strip() for a in aliases):
        raise f.error("aliases", f"must be a list of names (quote numbers), got {aliases!r}")
    basis = f.str("memory_basis")
    if basis not in _FILE_BASES:
        raise f.error("memory_basis", f"unknown basis {basis!r}", "one of: " +
                      ", ".join(_FILE_BASES))
    sources = f.sub("sources")
    for key in REQUIRED_SOURCES:
        if not isinstance(sources.raw.get(key), str) or not sources.raw[key].strip():
            raise sources.error(key, "is missing", "say where the number comes from")
    for key, value in sources.raw.items():
        if not isinstance(value, str):
            raise sources.error(str(key), f"must be text, got {value!r}")
    capability = f.raw.get("compute_capability")
    if capability is not None and not isinstance(capability, str):
        raise f.error("compute_capability", f"must be quoted text such as \"9.0\", got "
                      f"{capability!r}")
    if not f.has("interconnect"):
        raise f.error("interconnect", "is missing", "how the board joins its GPUs, one of: " +
                      ", ".join(INTERCONNECTS))
    interconnect = f.str("interconnect")
    if interconnect not in INTERCONNECTS:
        raise f.error("interconnect", f"unknown interconnect {interconnect!r}",
                      "one of: " + ", ".join(INTERCONNECTS))
    if "interconnect" not in sources.raw:
        raise sources.error("interconnect", "is missing", "say where the board's "
                            "interconnect comes from")
    flops = f.sub("dense_flops_per_s") if f.has("dense_flops_per_s") else None
    dense_flops: dict[str, int] = {}
    if flops is not None:
        flops.check_known({"fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8"})
        dense_flops = {str(k): flops.int(str(k)) for k in flops.raw}
        if "dense_flops_per_s" not in sources.raw:
            raise sources.error("dense_flops_per_s", "is missing", "say where the number "
                                "comes from")
    other = f.list("other_memory_bytes", [])
    if not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in other):
        raise f.error("other_memory_bytes", f"must be a list of byte counts, got {other!r}")
    if other and "other_memory_bytes" not in sources.raw:
        raise sources.error("other_memory_bytes", "is missing", "say where the totals come from")
    return GPU(
        interconnect=interconnect,
        other_memory_bytes=tuple(other),
        dense_flops_per_s=dense_flops,
        name=f.str("name"),
        memory_bytes=f.int("memory_bytes"),
        hbm_bandwidth_bytes_per_s=f.int("hbm_bandwidth_bytes_per_s"),
        fp8=f.bool("fp8", False),
        fp4=f.bool("fp4", False),
        vendor=f.str("vendor"),
        marketing_memory=f.str("marketing_memory"),
        architecture=f.str("architecture", ""),
        compute_capability=capability,
        display_name=f.str("display_name", ""),
        aliases=tuple(aliases),
        memory_basis=basis,
        sources={str(k): v for k, v in sources.raw.items()},
        notes=f.str("notes", ""),
    )


def load_catalog(path: str | Path | None = None) -> list[GPU]:
    """Every GPU in the catalog, in file order. `path` reads another file of the same schema."""
    return list(_load(str(path or CATALOG_PATH)))


def find_gpu(name: str, catalog: list[GPU] | None = None) -> GPU:
    """'h100', 'H100-80GB', 'h100-sxm', 'a100-80g', 'NVIDIA A100-SXM4-80GB' -> the GPU.

    Names and aliases match ignoring case, spaces, dashes, 'NVIDIA'/'AMD' and GB vs G. Nothing
    is guessed: 'a100' names four GPUs and 'rtx 6000' could be the Turing Quadro, so anything
    else raises BadInputError listing the GPUs it could mean (prefix matches first, then the
    closest spellings).
    """
    wanted = normalize(name)
    if not wanted:
        raise BadInputError("empty GPU name", "`kvplan gpus` lists the catalog")
    if catalog is None and CATALOG_PATH == Path(_PACKAGED) and _load.cache_info().currsize == 0:
        found = _find_packaged(wanted)
        if found is not None:
            return found
    gpus = catalog if catalog is not None else load_catalog()
    by_key = {key: gpu for gpu in gpus for key in _keys(gpu)}
    if wanted in by_key:
        return by_key[wanted]
    prefixed = _unique(gpu for key, gpu in by_key.items() if key.startswith(wanted))
    if len(prefixed) > 1:
        raise BadInputError(f"GPU name {name!r} is ambiguous: it could be "
                            + ", ".join(g.name for g in prefixed),
                            "give one of those names (`kvplan gpus` lists the catalog)")
    import difflib

    close = difflib.get_close_matches(wanted, list(by_key), n=10, cutoff=0.5)
    suggestions = _unique([*prefixed, *(by_key[k] for k in close)])[:5]
    hint = ("did you mean " + ", ".join(g.name for g in suggestions) + "? "
            if suggestions else "")
    raise BadInputError(
        f"unknown GPU {name!r}",
        hint + "`kvplan gpus` lists the catalog; for another GPU give its memory instead, "
        "e.g. --gpu-memory 24GiB (gpu_memory: 24GiB in a plan file)")


# The packaged catalog as it is written: each entry starts with a `  - name:` line and names
# its aliases in one `    aliases: [...]` flow list.
_ENTRY_START = re.compile(r"^  - name:[ \t]*(.*?)[ \t]*$", re.M)
_ENTRY_ALIASES = re.compile(r"^    aliases:[ \t]*\[([^\]]*)\][ \t]*$", re.M)


@functools.lru_cache(maxsize=16)
def _find_packaged(wanted: str) -> GPU | None:
    """The packaged catalog's GPU one of whose names normalises to `wanted`, parsing only that
    entry's YAML (the whole catalog is ~3 ms of YAML and checks, a twentieth of `kvplan plan`'s
    start-up). None when no entry's own name and alias lines match, or when the file is not
    written as expected: the caller then reads the whole catalog. tests/sources/test_gpus.py checks
    that every name and alias finds the same GPU both ways; the whole file's own checks
    (schema, unique names) run in the tests and whenever it is read whole."""
    text = CATALOG_PATH.read_text(encoding="utf-8")
    starts = list(_ENTRY_START.finditer(text))
    for i, start in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        entry = text[start.start():end]
        if re.search(r"^\S", entry, re.M) is not None:
            return None  # not a list of entries to the end: let the whole file be read
        lists = _ENTRY_ALIASES.findall(entry)
        names = [_plain_scalar(n) for n in (
            start.group(1), *(lists[0].split(",") if len(lists) == 1 else []))]
        if wanted in (normalize(n) for n in names if n is not None):
            done, item = _load_packaged(entry)
            if not done or not isinstance(item, list) or len(item) != 1:
                return None
            return _read_gpu(Fields(item[0], _PACKAGED, f"gpus[{i}]"))
    return None


def _plain_scalar(text: str) -> str | None:
    """A YAML scalar written plainly or in simple quotes ('"3090"' -> '3090'); None for
    anything YAML might read otherwise (the entry is then only found by a whole read)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
        return text if text and not re.search(r"['\"\\]", text) else None
    return text if text and text[0] not in "'\"&*!|>{[%@`" and "#" not in text else None


def _unique(gpus: Any) -> list[GPU]:
    seen: dict[str, GPU] = {}
    for gpu in gpus:
        seen.setdefault(gpu.name, gpu)
    return list(seen.values())


def custom_gpu(memory: str, name: str | None = None) -> GPU:
    """A GPU not in the catalog, from its memory: '24GiB' -> 25,769,803,776 bytes.

    Give the memory the framework reports (torch.cuda.mem_get_info()[1]), not the box's label.
    Bandwidth is unknown (0) and FP8/FP4 are taken as unsupported.
    """
    from kvplan.core.units import parse_bytes

    memory_bytes = parse_bytes(memory)
    text = memory.strip()
    return GPU(
        name=name or f"custom {text}",
        memory_bytes=memory_bytes,
        hbm_bandwidth_bytes_per_s=0,
        fp8=False,
        fp4=False,
        vendor="custom",
        marketing_memory=text,
        memory_basis="custom",
        sources={"memory_bytes": f"given on the command line: {text}"},
    )


def filter_gpus(gpus: list[GPU], text: str | None) -> list[GPU]:
    """GPUs whose name, alias, vendor or architecture contains `text` (normalized)."""
    if not text:
        return list(gpus)
    name = normalize(text)  # '' for 'nvidia' or 'amd': those match the vendor below
    plain = re.sub(r"[^a-z0-9]", "", text.lower())
    return [g for g in gpus
            if (name and any(name in k for k in _keys(g)))
            or any(plain and plain in re.sub(r"[^a-z0-9]", "", v.lower())
                   for v in (g.vendor, g.architecture))]


# --- the report ---------------------------------------------------------------------------

def gpu_to_dict(gpu: GPU) -> dict[str, Any]:
    return {
        "name": gpu.name, "id": gpu_id(gpu), "display_name": gpu.display_name,
        "aliases": list(gpu.aliases),
        "vendor": gpu.vendor, "architecture": gpu.architecture,
        "compute_capability": gpu.compute_capability, "memory_bytes": gpu.memory_bytes,
        "memory_basis": gpu.memory_basis, "marketing_memory": gpu.marketing_memory,
        "hbm_bandwidth_bytes_per_s": gpu.hbm_bandwidth_bytes_per_s, "fp8": gpu.fp8,
        "fp4": gpu.fp4, "interconnect": gpu.interconnect or None,
        "sources": dict(gpu.sources), "notes": gpu.notes,
    }
