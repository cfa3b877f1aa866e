"""`kvplan gpus`: the GPU catalog as a View (one row per GPU; the JSON carries every source)."""

from __future__ import annotations

from kvplan.output.render import Column, Table, View
from kvplan.sources.gpus import GPU, LIST_SCHEMA, gpu_id, gpu_to_dict

LIST_ROW_KEYS = (
    "name", "id", "vendor", "architecture", "compute_capability", "memory_bytes", "memory_basis",
    "marketing_memory", "hbm_bandwidth_bytes_per_s", "fp8", "fp4",
)



def _tb_per_s(bytes_per_s: int) -> str | None:
    return f"{bytes_per_s / 10**12:.2f}" if bytes_per_s else None


def gpus_view(gpus: list[GPU]) -> View:
    """A View for `kvplan gpus`: one row per GPU; JSON carries every source."""
    from kvplan import __version__

    rows = tuple({
        "name": g.name, "id": gpu_id(g), "vendor": g.vendor, "memory_bytes": g.memory_bytes,
        "memory": g.memory_bytes, "memory_basis": g.memory_basis,
        "marketing_memory": g.marketing_memory,
        "bandwidth_tb_s": _tb_per_s(g.hbm_bandwidth_bytes_per_s),
        "fp8": "yes" if g.fp8 else "no", "fp4": "yes" if g.fp4 else "no",
    } for g in gpus)
    columns = (
        # a narrow terminal leaves out basis, then the vendor's figure, the vendor, FP4, FP8
        Column("name", "GPU"), Column("id", "--gpu"), Column("vendor", "vendor", drop=3),
        Column("memory_bytes", "reported (B)", "exact"), Column("memory", "reported", "bytes"),
        Column("memory_basis", "basis", drop=5),
        Column("marketing_memory", "vendor figure", drop=4),
        Column("bandwidth_tb_s", "bandwidth TB/s"), Column("fp8", "FP8", drop=1),
        Column("fp4", "FP4", drop=2),
    )
    table = Table(f"{len(rows)} GPU{'s' if len(rows) != 1 else ''}", columns, rows)
    payload = {"schema": LIST_SCHEMA, "kvplan_version": __version__,
               "gpus": [gpu_to_dict(g) for g in gpus]}
    csv_rows = tuple({k: gpu_id(g) if k == "id" else getattr(g, k) for k in LIST_ROW_KEYS}
                     for g in gpus)
    csv_table = Table("gpus", tuple(Column(k, k) for k in LIST_ROW_KEYS), csv_rows)
    notes = [
        "reported: the total the device reports to the framework "
        "(torch.cuda.mem_get_info()[1]), what an engine's memory fraction applies to; "
        "nvidia-smi's Total is higher. It moves by a few MiB between drivers and drops ~6% on "
        "GDDR cards with ECC on.",
        "basis: exact_bytes = bytes printed by deviceQuery/rocm-smi; mib = torch's MiB figure; "
        "gib_2dp = a 2-decimal GiB figure (+-5 MiB); derived = no log from that GPU, see sources.",
        "vendor figure: GB there is 2^30 bytes of installed memory. Bandwidth: vendor peak, "
        "TB/s = 10^12 B/s. `--format json` gives the source of every number.",
    ]
    return View([table], payload, csv_table, notes)
