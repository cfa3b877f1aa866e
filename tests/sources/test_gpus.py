"""The GPU catalog: it loads, every number has a source, look-up by alias, and the figures
checked against the logs they were copied from."""

import csv
import io
import json
import re

import pytest
from paths import FIXTURES
from probes import probe
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError, SpecError
from kvplan.output.gpus import gpus_view
from kvplan.sources.gpus import (
    GPU,
    INTERCONNECTS,
    MEMORY_BASES,
    custom_gpu,
    find_gpu,
    load_catalog,
    normalize,
)

GIB = 2**30
MIB = 2**20
runner = CliRunner()
# a copy of the shared engine-logs.yaml (tests must pass from a clean clone)
SHARED_LOGS = FIXTURES / "engines" / "engine-logs.yaml"


def invoke(*args):
    return runner.invoke(app, list(args), env={"COLUMNS": "160"})


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


# --- the file -----------------------------------------------------------------------------

def test_catalog_loads_with_the_gpus_the_planner_needs(catalog):
    names = {g.name for g in catalog}
    for wanted in ("H100 SXM", "H100 PCIe", "H100 NVL", "H200", "H200 NVL", "B200", "GB200",
                   "A100 SXM 80GB", "A100 PCIe 80GB", "A100 SXM 40GB", "A100 PCIe 40GB",
                   "L40S", "L40", "L4", "A10G", "A10", "T4", "V100 16GB", "V100 32GB",
                   "RTX 3090", "RTX 4090", "RTX 5090", "RTX 6000 Ada", "RTX PRO 6000 Blackwell",
                   "MI300X", "MI325X", "MI355X", "H20", "RTX A6000", "RTX 5080", "A40",
                   "RTX A5000"):
        assert wanted in names
    assert all(isinstance(g, GPU) for g in catalog)


def test_every_gpu_names_a_source_for_memory_and_bandwidth(catalog):
    for gpu in catalog:
        for key in ("memory_bytes", "hbm_bandwidth_bytes_per_s", "marketing_memory"):
            assert gpu.sources.get(key, "").strip(), f"{gpu.name}: no source for {key}"
        assert gpu.memory_basis in MEMORY_BASES
        if gpu.memory_basis == "derived":  # a derived figure says so, and how
            assert gpu.sources["memory_bytes"].startswith("derived")


def test_numbers_are_plausible(catalog):
    for gpu in catalog:
        assert gpu.hbm_bandwidth_bytes_per_s > 10**11
        assert not gpu.fp4 or gpu.fp8  # every FP4 part also has FP8
        # the vendor's "80 GB" is 80 GiB of DRAM; the device reports a little less (driver
        # reservation, and ~6% more on GDDR with ECC on), never more
        installed_gib = int(re.match(r"(\d+) GB", gpu.marketing_memory).group(1))
        assert 0.90 < gpu.memory_bytes / (installed_gib * GIB) < 1, gpu.name


def test_every_hopper_hgx_board_declares_nvswitch_and_no_pcie_card_does(catalog):
    """The board's interconnect decides NCCL's init-time buffers (Deployment.nvswitch_hopper):
    the HGX boards of the SXM parts (H100 80GB HBM3, H200, H20) join their GPUs through
    NVSwitch; a PCIe card (H100 PCIe, H200 NVL, A100 PCIe) does not, whatever its chip."""
    hgx = [g for g in catalog if g.architecture == "hopper"
           and re.search(r"\b(SXM|HGX)", g.display_name)]
    assert {g.name for g in hgx} == {"H100 SXM", "H200", "H20"}
    assert all(g.interconnect == "nvswitch" for g in hgx)
    cards = [g for g in catalog if "PCIe" in f"{g.name} {g.display_name}"]
    assert {"H100 PCIe", "H200 NVL", "A100 PCIe 80GB", "A100 PCIe 40GB"} <= \
        {g.name for g in cards}
    assert not any(g.interconnect == "nvswitch" for g in cards)
    assert find_gpu("NVIDIA H100 80GB HBM3").interconnect == "nvswitch"  # the device's name
    for gpu in catalog:  # every entry declares its board and names the source
        assert gpu.interconnect in INTERCONNECTS, gpu.name
        assert gpu.sources["interconnect"].strip(), gpu.name
    # the boards the vendors' pages fix (kvplan/data/gpus.yaml cites them): a DGX Spark holds
    # one GB10 and joins another over ConnectX-7; GH200 and V100 entries stand for several
    assert [find_gpu(n).interconnect for n in ("gb10", "gh200", "v100-sxm2-16gb",
                                                "v100-pcie-32gb")] == \
        ["network", "varies", "varies", "varies"]


def test_names_and_aliases_are_unique_after_normalizing(catalog):
    keys = [normalize(n) for g in catalog for n in (g.name, *g.aliases)]
    assert len(keys) == len(set(keys))


# --- look-up ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, name", [
    ("h100", "H100 SXM"), ("H100-80GB", "H100 SXM"), ("h100-sxm", "H100 SXM"),
    ("H100 SXM", "H100 SXM"), ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("h100 pcie", "H100 PCIe"),
    ("a100-80g", "A100 SXM 80GB"), ("A100-80GB", "A100 SXM 80GB"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"), ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
    ("a100_40gb", "A100 SXM 40GB"), ("h200", "H200"), ("h200-nvl", "H200 NVL"),
    ("Tesla T4", "T4"), ("nvidia-l4", "L4"), ("L40s", "L40S"), ("l40", "L40"),
    ("rtx4090", "RTX 4090"), ("NVIDIA GeForce RTX 3090", "RTX 3090"), ("5090", "RTX 5090"),
    ("Tesla V100-SXM2-32GB", "V100 32GB"), ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
    ("rtx-pro-6000", "RTX PRO 6000 Blackwell"), ("AMD Instinct MI300X", "MI300X"),
    ("mi355x", "MI355X"), ("gb200", "GB200"), ("b200", "B200"), ("NVIDIA H20", "H20"),
    ("a6000", "RTX A6000"), ("NVIDIA GeForce RTX 5080", "RTX 5080"), ("NVIDIA A40", "A40"),
    ("NVIDIA RTX A5000", "RTX A5000"), ("NVIDIA GB10", "GB10"), ("dgx spark", "GB10"),
])
def test_find_gpu_by_alias(text, name):
    assert find_gpu(text).name == name


def test_ambiguous_names_list_the_candidates():
    with pytest.raises(BadInputError) as exc:
        find_gpu("a100")
    assert "ambiguous" in exc.value.message
    assert "A100 SXM 80GB" in exc.value.message and "A100 PCIe 40GB" in exc.value.message


def test_unknown_gpu_suggests_the_closest():
    with pytest.raises(BadInputError) as exc:
        find_gpu("h1000")
    assert "unknown GPU 'h1000'" in exc.value.message
    assert "H100 SXM" in exc.value.hint


def test_custom_gpu_from_memory():
    gpu = custom_gpu("24GiB")
    assert gpu.memory_bytes == 24 * 2**30
    assert gpu.hbm_bandwidth_bytes_per_s == 0 and not gpu.fp8 and not gpu.fp4
    assert custom_gpu("80GB").memory_bytes == 80 * 10**9
    with pytest.raises(BadInputError):
        custom_gpu("24")  # a unit is required


# --- figures, each against the log it was copied from ---------------------------------------

def test_rtx_3090_matches_the_vllm_log():
    # engine-logs.yaml vllm-i10517-llama31-8b-rtx3090-mml29000: total_gpu_memory=23.58GiB
    assert abs(find_gpu("rtx 3090").memory_bytes / GIB - 23.58) < 0.01


def test_rtx_5090_matches_the_trtllm_log():
    # engine-logs.yaml trtllm-doc-llama31-8b-fp8-rtx5090: "total: 31.84 GiB"
    assert abs(find_gpu("rtx 5090").memory_bytes / GIB - 31.84) < 0.01


@pytest.mark.parametrize("text, expected_bytes", [
    ("h100", 85_028_896_768),  # deviceQuery: "81090 MBytes (85028896768 bytes)", driver 12.8
    ("a100-80gb", 85_100_068_864),  # deviceQuery A100-SXM4-80GB: "(85100068864 bytes)"
    ("A100 PCIe 80GB", 84_974_239_744),  # deviceQuery A100 80GB PCIe: "(84974239744 bytes)"
    ("A100 PCIe 40GB", 42_298_834_944),  # deviceQuery A100-PCIE-40GB: "(42298834944 bytes)"
    ("l40s", 47_576_711_168),  # alvarobartt/cuda-device-query README: "(47576711168 bytes)"
    ("l4", 23_612_293_120),  # deviceQuery NVIDIA L4: "(23612293120 bytes)"
    ("a10", 23_696_375_808),  # deviceQuery NVIDIA A10, driver 12.8: "(23696375808 bytes)"
    ("t4", 15_843_721_216),  # deviceQuery Tesla T4: "(15843721216 bytes)"
    ("v100 16gb", 16_928_342_016),  # deviceQuery V100-SXM2-16GB: "(16928342016 bytes)"
    ("v100 32gb", 34_089_730_048),  # deviceQuery V100-SXM2-32GB: "(34089730048 bytes)"
    ("mi300x", 206_141_652_992),  # rocm-smi, ROCm/legacy-rocm-build#4750
])
def test_exact_byte_counts(text, expected_bytes):
    gpu = find_gpu(text)
    assert gpu.memory_basis == "exact_bytes"
    assert gpu.memory_bytes == expected_bytes


@pytest.mark.parametrize("text, mib", [
    ("h200", 143_156),  # torch: total_memory=143156MB
    ("b200", 182_631),  # torch: total_memory=182631MB; pytorch/ao#4002 "178.35 GB" (2^30)
    ("a100-40gb", 40_536),  # Paddle docstring: total_memory=40536MB
    ("a10g", 22_587),  # torch: total_memory=22587MB
    ("rtx 6000 ada", 48_622),  # torch: total_memory=48622MB
    ("rtx pro 6000", 97_250),  # torch: total_memory=97250MB (Server Edition)
    ("h20", 97_285),  # torch: name='NVIDIA H20' ... total_memory=97285MB
    ("rtx a6000", 48_676),  # torch: name='NVIDIA RTX A6000' ... total_memory=48676MB
    ("rtx 5080", 16_302),  # torch: name='NVIDIA GeForce RTX 5080' ... total_memory=16302MB
    ("a40", 45_416),  # torch: name='NVIDIA A40' ... total_memory=45416MB (ECC on)
    ("a5000", 24_138),  # torch: name='NVIDIA RTX A5000' ... total_memory=24138MB
])
def test_torch_mib_figures(text, mib):
    assert find_gpu(text).memory_bytes == mib * MIB


@pytest.mark.parametrize("text, gib", [
    ("h100", 79.19),  # torch OOM on H100 80GB: "total capacity of 79.19 GiB"
    ("h100 pcie", 79.19),  # torch OOM on H100 PCIe
    ("h100 nvl", 93.09),  # torch OOM on H100 NVL
    ("h200", 139.80),  # torch OOMs on H200: 139.80 / 139.81 GiB
    ("b200", 178.35),  # pytorch/ao#4002: "Total Global Memory: 178.35 GB" (2^30)
    ("gb200", 184.31),  # torch OOMs on GB200
    ("l40", 44.40),  # QwenLM/Qwen3-VL#2097
    ("rtx 4090", 23.64),  # ali-vilab/VGen#104
    ("v100 32gb", 31.75),  # hiyouga/LlamaFactory#182
    ("mi300x", 191.98),  # HIP OOMs on MI300X
    ("mi325x", 255.98),  # HIP OOMs on a 256 GB AMD part (derived: 256 GiB - 16 MiB)
    ("mi355x", 287.98),  # HIP OOMs on 288 GB CDNA4 (derived: 288 GiB - 16 MiB)
    ("gb10", 121.63),  # vLLM on a DGX Spark: "Free memory on device cuda:0 (110.73/121.63 GiB)"
])
def test_reported_gib_as_printed_in_logs(text, gib):
    assert round(find_gpu(text).memory_bytes / GIB, 2) == pytest.approx(gib, abs=0.011)


def test_vendor_bandwidth_figures():
    assert find_gpu("h100").hbm_bandwidth_bytes_per_s == 3_350_000_000_000  # 3.35 TB/s
    assert find_gpu("h200").hbm_bandwidth_bytes_per_s == 4_800_000_000_000  # 4.8 TB/s
    assert find_gpu("a100-80gb").hbm_bandwidth_bytes_per_s == 2_039_000_000_000
    assert find_gpu("mi300x").hbm_bandwidth_bytes_per_s == 5_300_000_000_000  # 5.3 TB/s
    assert find_gpu("h20").hbm_bandwidth_bytes_per_s == 4_000_000_000_000  # 4.0 TB/s
    assert find_gpu("a6000").hbm_bandwidth_bytes_per_s == 768 * 10**9  # 768 GB/s
    assert find_gpu("a40").hbm_bandwidth_bytes_per_s == 696 * 10**9  # 696 GB/s
    # 256-bit GDDR7 at 30 Gbps: 256 / 8 x 30 GB/s
    assert find_gpu("rtx 5080").hbm_bandwidth_bytes_per_s == 256 // 8 * 30 * 10**9


def test_precision_support():
    assert (find_gpu("h100").fp8, find_gpu("h100").fp4) == (True, False)
    assert (find_gpu("b200").fp8, find_gpu("b200").fp4) == (True, True)
    assert (find_gpu("a100-80gb").fp8, find_gpu("a100-80gb").fp4) == (False, False)
    assert find_gpu("l40s").fp8 and find_gpu("rtx 4090").fp8  # Ada, compute capability 8.9


def test_catalog_agrees_with_shared_engine_logs():
    import yaml

    entries = {e["id"]: e for e in yaml.safe_load(SHARED_LOGS.read_text())["entries"]}
    for log_id, gpu in (("vllm-i10517-llama31-8b-rtx3090-mml29000", "rtx 3090"),
                        ("trtllm-doc-llama31-8b-fp8-rtx5090", "rtx 5090")):
        logged = entries[log_id]["reported"]["total_gpu_memory_gib"]
        assert abs(find_gpu(gpu).memory_bytes / GIB - logged) < 0.01
        assert log_id in find_gpu(gpu).sources["memory_bytes"]


# --- loader errors ------------------------------------------------------------------------

GOOD_ENTRY = """\
  - name: Test GPU
    aliases: [TG-1]
    vendor: nvidia
    memory_bytes: 1000
    memory_basis: exact_bytes
    marketing_memory: 1 GB
    hbm_bandwidth_bytes_per_s: 10
    fp8: false
    fp4: false
    interconnect: pcie
    sources: {memory_bytes: a log, hbm_bandwidth_bytes_per_s: a datasheet, interconnect: a brief}
"""


def _write(tmp_path, text):
    path = tmp_path / "gpus.yaml"
    path.write_text(text)
    return path


def test_a_good_file_loads(tmp_path):
    gpus = load_catalog(_write(tmp_path, "schema: kvplan.gpus/1\ngpus:\n" + GOOD_ENTRY))
    assert [g.name for g in gpus] == ["Test GPU"]


def test_a_missing_source_names_file_and_field(tmp_path):
    path = _write(tmp_path, "schema: kvplan.gpus/1\ngpus:\n" + GOOD_ENTRY.replace(
        ", hbm_bandwidth_bytes_per_s: a datasheet", ""))
    with pytest.raises(SpecError) as exc:
        load_catalog(path)
    assert str(path) in exc.value.message
    assert "gpus[0].sources.hbm_bandwidth_bytes_per_s" in exc.value.message


def test_a_duplicate_alias_is_an_error(tmp_path):
    second = GOOD_ENTRY.replace("Test GPU", "Other").replace("[TG-1]", "[tg 1]")
    with pytest.raises(SpecError) as exc:
        load_catalog(_write(tmp_path, "schema: kvplan.gpus/1\ngpus:\n" + GOOD_ENTRY + second))
    assert "gpus[1]" in exc.value.message and "Test GPU" in exc.value.message


def test_wrong_types_and_schema(tmp_path):
    with pytest.raises(SpecError, match="gpus\\[0\\].memory_bytes"):
        load_catalog(_write(tmp_path, "schema: kvplan.gpus/1\ngpus:\n"
                            + GOOD_ENTRY.replace("memory_bytes: 1000", "memory_bytes: 80GB")))
    with pytest.raises(SpecError, match="schema"):
        load_catalog(_write(tmp_path, "schema: kvplan.gpus/9\ngpus: []\n"))
    with pytest.raises(SpecError, match="line"):
        load_catalog(_write(tmp_path, "schema: [\n"))


def test_an_interconnect_is_one_of_the_known_boards_and_names_its_source(tmp_path):
    def catalog_with(name, line, source=", interconnect: a brief"):  # a file each: the
        path = tmp_path / f"{name}.yaml"  # loader caches by path
        path.write_text("schema: kvplan.gpus/1\ngpus:\n" + GOOD_ENTRY.replace(
            "    interconnect: pcie\n", line).replace(", interconnect: a brief", source))
        return load_catalog(path)

    good = catalog_with("good", "    interconnect: nvswitch\n")
    assert good[0].interconnect == "nvswitch"
    with pytest.raises(SpecError, match=r"gpus\[0\]\.interconnect.*nvlink") as exc:
        catalog_with("unknown", "    interconnect: nvlink\n")
    assert "nvlink-bridge" in (exc.value.hint or "")  # the values it takes
    with pytest.raises(SpecError, match=r"gpus\[0\]\.sources\.interconnect"):
        catalog_with("unsourced", "    interconnect: pcie\n", "")
    # every entry says how its board joins GPUs: one without it is refused by name
    with pytest.raises(SpecError, match=r"gpus\[0\]\.interconnect.*missing") as exc:
        catalog_with("undeclared", "")
    assert "varies" in (exc.value.hint or "")


# --- the command --------------------------------------------------------------------------

def test_gpus_json_keys(catalog):
    res = invoke("gpus", "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert set(doc) == {"schema", "kvplan_version", "gpus"}
    assert doc["schema"] == "kvplan.gpu-list/1"
    assert len(doc["gpus"]) == len(catalog)
    for row in doc["gpus"]:
        assert set(row) == {
            "name", "id", "display_name", "aliases", "vendor", "architecture",
            "compute_capability", "memory_bytes", "memory_basis", "marketing_memory",
            "hbm_bandwidth_bytes_per_s", "fp8", "fp4", "interconnect", "sources", "notes"}
        assert row["interconnect"] in INTERCONNECTS
        assert isinstance(row["memory_bytes"], int) and isinstance(row["fp8"], bool)
        # the id shown is one `--gpu` finds this very GPU by
        assert find_gpu(row["id"], catalog).name == row["name"]
        assert row["sources"]["memory_bytes"]


def test_gpus_filter_and_csv():
    res = invoke("gpus", "h100", "-f", "csv")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["name"] for r in rows] == ["H100 SXM", "H100 PCIe", "H100 NVL"]
    assert int(rows[0]["memory_bytes"]) == 85_028_896_768
    assert int(rows[0]["hbm_bandwidth_bytes_per_s"]) == 3_350_000_000_000


def test_gpus_table_and_markdown():
    table = invoke("gpus", "mi300x")
    assert table.exit_code == 0, table.output
    assert "191.984 GiB" in table.stdout and "206,141,652,992" in table.stdout
    assert "5.30" in table.stdout
    md = invoke("gpus", "amd", "-f", "markdown", "--units", "si")
    assert md.exit_code == 0
    assert md.stdout.startswith("**3 GPUs**")
    assert "| MI300X | mi300x | amd | 206,141,652,992 | 206.142 GB |" in md.stdout


def test_unknown_gpu_exits_2_with_suggestions():
    res = invoke("gpus", "h1000")
    assert res.exit_code == 2, res.output
    assert "unknown GPU 'h1000'" in res.stderr and "H100 SXM" in res.stderr
    assert "Traceback" not in res.output


def test_bad_format_exits_2():
    assert invoke("gpus", "-f", "xml").exit_code == 2


def test_report_of_a_custom_gpu_has_no_bandwidth():
    report = gpus_view([custom_gpu("24GiB")])
    assert report.tables[0].rows[0]["bandwidth_tb_s"] is None
    assert report.payload["gpus"][0]["memory_bytes"] == 24 * GIB


def test_gpus_json_imports_nothing_heavy():
    result = probe(["gpus", "-f", "json"], ("torch", "numpy", "rich", "huggingface_hub"))
    assert result.loaded == [], result.stderr
    assert json.loads(result.stdout)["schema"] == "kvplan.gpu-list/1"  # the command ran


def test_packaged_catalog_fast_read_equals_the_guarded_reader():
    # the packaged catalog skips the guarded reader's per-node checks (start-up); it must read
    # exactly the values the guarded reader reads, and any other path must still be guarded
    from kvplan.sources import gpus as g
    from kvplan.sources.reader import compose_yaml, construct_yaml

    # the guarded reader's PyYAML path itself (parse_yaml would take the plain-subset reader)
    text = g.CATALOG_PATH.read_text(encoding="utf-8")
    guarded = construct_yaml(*compose_yaml(text, "gpus.yaml"), "gpus.yaml")
    assert g._read_packaged() == guarded
    assert type(guarded["gpus"][0]["memory_bytes"]) is int
    g._load.cache_clear()
    assert g._load(g._PACKAGED) == tuple(g.catalog_from_dict(guarded, g._PACKAGED))


def test_packaged_entry_lookup_finds_what_the_whole_catalog_finds(monkeypatch):
    # `--gpu NAME` parses only the entry whose own name/alias lines match (start-up); every
    # name and alias must give the GPU the whole catalog gives, every field included
    from kvplan.sources import gpus as g

    whole = g.load_catalog()
    for gpu in whole:
        for spelling in (gpu.name, *gpu.aliases, gpu.name.upper()):
            found = g._find_packaged(g.normalize(spelling))
            assert found == gpu and found.sources == gpu.sources, spelling
            assert found.dense_flops_per_s == gpu.dense_flops_per_s
    assert g._find_packaged(g.normalize("a100")) is None  # a prefix: the whole file decides
    g._load.cache_clear()
    read = []
    monkeypatch.setattr(g, "catalog_from_dict", lambda *a: read.append(a) or [])
    assert g.find_gpu("H100-SXM5") == whole[0] and read == []  # no whole-catalog read
