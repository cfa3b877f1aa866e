"""Weight parameters and bytes: exact from safetensors headers, else estimated from config.json.

A safetensors file starts with an 8-byte little-endian header length, then that many bytes of
JSON: `{tensor name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`
(https://huggingface.co/docs/safetensors/index#format). Reading the headers gives the exact
parameter count and bytes per dtype without reading any weights: locally from the files, on the
Hub with HTTP range requests (kvplan.sources.hub). Where only config.json is at hand, the count
is an
estimate from the architecture (embeddings + attention + MLP/MoE + norms), marked `exact=False`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kvplan.core.errors import SpecError
from kvplan.core.record import record
from kvplan.sources.fields import Fields

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit

# Bits per element of each safetensors dtype; sub-byte dtypes are packed.
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}


@record
class DtypeWeights:
    dtype: str  # safetensors name: BF16, F32, F8_E4M3, ...
    num_params: int
    num_bytes: int


@record
class Weights:
    total_params: int
    total_bytes: int
    by_dtype: tuple[DtypeWeights, ...]  # largest first
    exact: bool  # True: summed from safetensors headers; False: estimated from config.json
    num_files: int = 0  # safetensors files read (0 for an estimate)

    def params_of(self, dtype: str) -> int:
        return sum(d.num_params for d in self.by_dtype if d.dtype == dtype)

    def bytes_of(self, dtype: str) -> int:
        return sum(d.num_bytes for d in self.by_dtype if d.dtype == dtype)


@record
class _Tensor:
    dtype: str
    num_params: int
    num_bytes: int


# --- exact: safetensors headers -----------------------------------------------------------

def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """A local safetensors file -> (its JSON header, the size of the data after it)."""
    source = str(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise SpecError(source, None, f"is not a safetensors file: it has {size} bytes, "
                                "fewer than the 8-byte header length")
            length = int.from_bytes(prefix, "little")
            if length == 0 or length > min(size - 8, MAX_HEADER_BYTES):
                raise SpecError(source, None, f"has a corrupt safetensors header: the length field "
                                f"says {length:,} bytes but {size - 8:,} follow it",
                                "the file is truncated or not safetensors; download it again")
            raw = f.read(length)
    except OSError as exc:
        raise SpecError(source, None, f"cannot be read: {exc.strerror or exc}") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(source, None, f"has a corrupt safetensors header: not JSON ({exc})",
                        "the file is damaged; download it again") from None
    if not isinstance(header, dict):
        raise SpecError(source, None, "has a corrupt safetensors header: not a JSON object")
    return header, size - 8 - length


def tensors_of_header(header: dict[str, Any], source: str, data_bytes: int | None = None
                      ) -> list[_Tensor]:
    """Check each tensor entry of a header and count its parameters and bytes."""
    out = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        f = Fields(entry, source, name)
        dtype, shape, offsets = f.str("dtype"), f.list("shape"), f.list("data_offsets")
        out.append(_tensor(source, name, dtype, shape, offsets, data_bytes))
    return out


def _tensor(source: str, name: str, dtype: str, shape: Any, offsets: Any,
            data_bytes: int | None) -> _Tensor:
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise SpecError(source, f"{name}.shape", f"must be whole numbers, got {shape!r}")
    if (len(offsets) != 2 or not all(isinstance(o, int) and not isinstance(o, bool)
                                     for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
        raise SpecError(source, f"{name}.data_offsets", f"must be [begin, end] with "
                        f"0 <= begin <= end, got {list(offsets)!r}")
    if data_bytes is not None and offsets[1] > data_bytes:
        raise SpecError(source, f"{name}.data_offsets", f"ends at byte {offsets[1]:,} but the "
                        f"file holds {data_bytes:,} bytes of data", "the file is truncated")
    num_params = math.prod(shape)  # a scalar (shape []) is one parameter
    num_bytes = offsets[1] - offsets[0]
    bits = DTYPE_BITS.get(dtype)
    if bits is not None and (num_params * bits + 7) // 8 != num_bytes:
        raise SpecError(source, f"{name}.data_offsets", f"span {num_bytes:,} bytes but shape "
                        f"{list(shape)} of {dtype} needs {(num_params * bits + 7) // 8:,}",
                        "the header is corrupt")
    return _Tensor(dtype, num_params, num_bytes)


def weights_from_tensors(tensors: Iterable[_Tensor], num_files: int) -> Weights:
    params: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    for t in tensors:
        params[t.dtype] = params.get(t.dtype, 0) + t.num_params
        nbytes[t.dtype] = nbytes.get(t.dtype, 0) + t.num_bytes
    by_dtype = tuple(sorted((DtypeWeights(d, params[d], nbytes[d]) for d in params),
                            key=lambda d: (-d.num_bytes, d.dtype)))
    return Weights(sum(params.values()), sum(nbytes.values()), by_dtype, exact=True,
                   num_files=num_files)


def safetensors_files(directory: Path) -> list[Path]:
    """The weight files of a checkpoint directory: the shards its index names, else
    model.safetensors, else model-*.safetensors, else every *.safetensors. (Mistral repos ship
    consolidated.safetensors beside the model-* shards: the same weights, counted once.)"""
    index = directory / INDEX_FILE
    if index.is_file():
        from kvplan.sources.hfconfig import parse_json

        try:
            raw = parse_json(index.read_bytes(), str(index))
        except OSError as exc:
            raise SpecError(str(index), None, f"cannot be read: {exc.strerror or exc}") from None
        weight_map = Fields(raw, str(index)).sub("weight_map")
        shards = sorted({str(v) for v in weight_map.raw.values()})
        missing = [s for s in shards if not (directory / s).is_file()]
        if missing:
            raise SpecError(str(index), "weight_map", f"names {missing[0]}, which is not in "
                            f"{directory}", "download every shard the index lists")
        return [directory / s for s in shards]
    if (directory / SINGLE_FILE).is_file():
        return [directory / SINGLE_FILE]
    return sorted(directory.glob("model-*.safetensors")) or sorted(directory.glob("*.safetensors"))


def local_weights(directory: Path) -> Weights | None:
    """Exact weights of a local checkpoint directory, or None when it has no safetensors."""
    files = safetensors_files(directory)
    if not files:
        return None
    tensors: list[_Tensor] = []
    for path in files:
        header, data_bytes = read_header(path)
        tensors += tensors_of_header(header, str(path), data_bytes)
    return weights_from_tensors(tensors, len(files))


def listed_weights(label: str, files: dict[str, Any]) -> Weights:
    """Exact weights from safetensors headers another reader already parsed (the Hub's
    `get_safetensors_metadata`, kvplan.sources.hub.safetensors_tensors): per file, entries
    with name, dtype, shape and data_offsets, checked as a local header is."""
    tensors = [_tensor(f"{label} {filename}", t.name, t.dtype, list(t.shape),
                       list(t.data_offsets), None)
               for filename, entries in files.items() for t in entries]
    return weights_from_tensors(tensors, len(files))


# --- estimate: config.json ----------------------------------------------------------------

def estimate_weights(raw: Any, source: str, dtype: str = "bf16") -> Weights:
    """Weights of a decoder computed from its config.json alone (exact=False): tensor by
    tensor in the checkpoint's own format (kvplan.core.weights, its quantization_config
    included), a family the inventory does not model laid out as a generic decoder
    (kvplan.core.weights.generic_note): the one estimate `import`, `plan` and the front door
    share. A SpecError when the config does not give the shapes."""
    from kvplan.core.weights import estimable, inventory
    from kvplan.sources.hfconfig import spec_from_config

    spec = replace(spec_from_config(raw, source, name="estimate"), dtype=dtype)
    why = estimable(spec)
    if why is not None:
        raise SpecError(source, None, f"the weights cannot be estimated: {why}",
                        "give the weights' size (--weights-memory), or import the checkpoint "
                        "with its safetensors files")
    inv = inventory(spec, spec.quantization)
    elements = inv.elements_by_dtype()
    by_dtype = tuple(DtypeWeights(d, elements[d], b) for d, b in inv.bytes_by_dtype().items())
    return Weights(sum(elements.values()), inv.total_bytes, by_dtype, exact=False)


# --- what the CLI asks for ----------------------------------------------------------------

def cheap_weights(model: str) -> Weights | None:
    """Exact weights when they cost nothing to read: MODEL is a local checkpoint directory
    (or a config.json inside one) holding safetensors files. Otherwise None."""
    path = Path(model).expanduser()
    directory = path if path.is_dir() else path.parent if path.name == "config.json" else None
    if directory is None or not directory.is_dir():
        return None
    return local_weights(directory)
