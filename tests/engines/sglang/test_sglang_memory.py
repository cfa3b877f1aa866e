"""SGLang's memory before the pool (kvplan.engines.sglang.memory): its releases as data
(RULES: one row per release whose source showed a change, the newest when no release is given),
and the free-memory readings, the default mem_fraction_static and the token count predicted from
the GPU and the settings alone against real start-up logs
(tests/fixtures/engines/buffer-logs.yaml). The facts asserted are SGLang's, from its source
distributions and logs."""

from pathlib import Path

import pytest
from buffer_cases import BY_ID, GIB, MIB, entries, error, sglang_predict
from engine_cases import LLAMA8B, LLAMA8B_DIMS

from kvplan.engines import sglang
from kvplan.engines.sglang import memory as sglang_memory
from kvplan.sources.gpus import find_gpu


def test_sglang_rows_by_release():
    # server_args.py: mem_fraction_static by TP alone up to 0.4.5, the GPU's memory deciding
    # from 0.4.6; prefill (piecewise) CUDA graphs on by default from 0.5.10 (the 0.5.9 wheel's
    # enable_piecewise_cuda_graph is False); no version: the newest
    rules = sglang_memory.rules_for
    assert not rules((0, 4, 5)).mem_fraction_by_memory and rules((0, 4, 6)).mem_fraction_by_memory
    assert [rules(v).mem_fraction_rule for v in ((0, 4, 5), (0, 4, 6), (0, 4, 7), (0, 4, 8),
                                                 (0, 5, 2), (0, 5, 3))] == \
        ["tp", "tp-13gib", "parallel", "reserved", "reserved", "activations"]
    assert not rules((0, 5, 9)).prefill_cuda_graphs
    assert all(rules((0, 5, m)).prefill_cuda_graphs for m in range(10, 24))
    assert rules(None) == sglang_memory.RULES[max(sglang_memory.RULES)]
    releases = sorted(sglang_memory.RULES)
    for before, after in zip(releases, releases[1:], strict=False):
        assert sglang_memory.RULES[before] != sglang_memory.RULES[after], after


@pytest.mark.parametrize("log_id, within_gib", [
    ("sglang-docs-llama31-8b-h100-2025-01", 0.08), ("sglang-h100-qwen3-30b-a3b-fp8-2026-08", 0.01)])
def test_sglang_budget_subtracts_the_weights_as_free_memory_sees_them(log_id, within_gib):
    # model_runner.py::profile_max_num_token sizes the pool from get_available_gpu_memory read
    # after the load (torch.cuda.empty_cache, then mem_get_info; its GB are GiB), so the
    # weights the budget takes off are the drop its two "avail mem" lines show: the allocator's
    # segments and the fp32 rotary caches, more than the tensors' own bytes
    e = BY_ID[log_id]
    r = e["reported"]
    logged = (r["avail_before_load_gb"] - r["avail_after_load_gb"]) * GIB
    mem, _ = sglang_predict(e)
    assert mem.free_before_load_bytes - mem.free_after_load_bytes == mem.weights_bytes
    assert abs(mem.weights_bytes - logged) <= within_gib * GIB
    if e["model"] == "llama-3.1-8b":  # 8,030,261,248 bf16 parameters: the tensors alone
        tensors = 8_030_261_248 * 2
        assert abs(mem.weights_bytes - logged) < abs(tensors - logged)
        # Llama 3.1's rope cache: 131,072 positions x 128 (cos and sin) x 4 B, kept in fp32
        assert mem.weights_bytes - tensors >= 131_072 * 128 * 4


def test_sglang_prefill_graph_sizes_as_the_log_lists_them():
    # the 2026-08 H100 log captures [4, 8, ..., 8192]: 8 + 14 + 8 + 8 + 12 + 8 = 58 sizes
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, 8193, 512)]
    assert sglang.prefill_graph_sizes(8192) == len(sizes) == 58
    assert sglang.prefill_graph_sizes(4096) == sum(s <= 4096 for s in sizes) == 50  # 8+14+8+8+12


def test_sglang_default_fraction_with_prefill_graphs_matches_the_log():
    # 0.5.23 reserve on an H100 (81,089 MB): 512 + 8,192 x 1.5 + 128 + 2 x 256 + 58 x 8 MB
    h100 = find_gpu("h100").memory_bytes
    mb = h100 / MIB
    expected = round((mb - (512 + 8192 * 1.5 + 1 / 8 * 1024 + 2 * 256 + 58 * 8)) / mb, 3)
    assert sglang.sglang_default_mem_fraction(h100, version=(0, 5, 23)) == expected == 0.829
    assert sglang.sglang_default_mem_fraction(h100, version=(0, 5, 23),
                                         prefill_cuda_graph=False) == 0.834
    # MLA backends reserve 1.5 GiB for their prefill graphs instead
    assert sglang.sglang_default_mem_fraction(h100, version=(0, 5, 23), mla=True) == \
        round((mb - (512 + 8192 * 1.5 + 128 + 512 + 1536)) / mb, 3)
    # what the log's own numbers imply: 1 - (after - rest) / before, rest = the K+V pool
    e = BY_ID["sglang-h100-qwen3-30b-a3b-fp8-2026-08"]["reported"]
    rest = e["max_total_num_tokens"] * 48 * 4 * 128 * 2 * 2 / GIB
    implied = 1 - (e["avail_after_load_gb"] - rest) / e["avail_before_load_gb"]
    assert abs(implied - expected) <= 0.002


def test_sglang_default_fraction_of_the_2025_docs_log():
    e = BY_ID["sglang-docs-llama31-8b-h100-2025-01"]
    mem, _ = sglang_predict(e)
    assert mem.mem_fraction_static == e["reported"]["mem_fraction_static"] == 0.88


@pytest.mark.parametrize("e", entries("sglang"), ids=lambda e: e["id"])
def test_sglang_tokens_within_2_percent(e):
    _, tokens = sglang_predict(e)
    assert abs(error(tokens, e["reported"]["max_total_num_tokens"])) <= 0.02


def test_sglang_mem_fraction_defaults():
    # classic per-TP table
    assert [sglang.sglang_default_mem_fraction(0, tp, version=(0, 4)) for tp in (1, 2, 4, 8, 16)] \
        == [0.88, 0.87, 0.85, 0.81, 0.79]
    # 0.5.x: H100 (79.19 GiB): chunked prefill 8192, decode graphs up to 256:
    # reserved = max(512 + 8192 x 1.5 + 1/8 x 1024 + 2 x 256, 10,240) = 13,440 MB
    h100 = 85028896768
    mb = h100 / 2**20
    v053 = (0, 5, 3)  # before the prefill CUDA graphs' reserve (0.5.23)
    assert sglang.sglang_default_mem_fraction(h100, tp=1, version=v053) == \
        round((mb - 13440) / mb, 3) == 0.834
    # B200 (182,631 MiB >= 160 GiB): chunked 16384, max_bs 512
    b200 = 182631 * 2**20
    assert sglang.sglang_default_mem_fraction(b200, version=v053) == round(
        (182631 - (512 + 16384 * 1.5 + 128 + 2 * 512)) / 182631, 3) == 0.856
    # H100 at TP 8: decode graphs up to 512, and 8 x 1 / 8 x 1,024 MB
    assert sglang.sglang_default_mem_fraction(h100, tp=8, version=v053) == round(
        (mb - (512 + 8192 * 1.5 + 1024 + 2 * 512)) / mb, 3)
    # a 24 GiB card in 0.5.3: chunked 2048, max_bs 16 (the 0.5.3 wheel's "A10, 4090, 5090"
    # branch)
    mb24 = 24 * 1024
    assert sglang.sglang_default_mem_fraction(24 * GIB, version=v053) == round(
        (mb24 - (512 + 2048 * 1.5 + 128 + 2 * 16)) / mb24, 3) == 0.848


@pytest.mark.parametrize("version, tp, chunked, max_bs", [
    # server_args.py _handle_gpu_memory_settings, the "elif gpu_mem < 35 * 1024" branch
    ((0, 5, 3), 1, 2048, 16), ((0, 5, 3), 4, 2048, 80),  # 0.5.3 wheel
    ((0, 5, 4), 1, 2048, 16),  # 0.5.4 wheel
    ((0, 5, 5), 1, 2048, 24), ((0, 5, 5), 8, 2048, 80),  # 0.5.5 wheel
    ((0, 5, 19), 2, 2048, 24),  # 0.5.19 arg_groups/memory_hook.py
    ((0, 5, 20), 2, 4096, 48), ((0, 5, 20), 4, 4096, 160),  # 0.5.20 memory_hook.py
])
def test_sglang_small_card_defaults_by_release(version, tp, chunked, max_bs):
    # an RTX 4090 / 5090 class card of 24 GiB (24,576 MiB):
    # reserved = 512 + max(chunked, 2048) x 1.5 + tp / 8 x 1024 + 2 x max_bs
    mb = 24 * 1024
    # (the prefill graphs' reserve, from 0.5.10, left out: tested on its own below)
    reserved = 512 + max(chunked, 2048) * 1.5 + tp / 8 * 1024 + 2 * max_bs
    assert sglang.sglang_default_mem_fraction(24 * GIB, tp=tp, version=version,
                                              prefill_cuda_graph=False) == \
        round((mb - reserved) / mb, 3)


@pytest.mark.parametrize("gib, tp, chunked, max_bs", [
    # below 60 GiB (A100 40 GB, L40S): 4096 and 32, 160 at TP 4 or more (0.5.3-0.5.23)
    (44, 1, 4096, 32), (44, 4, 4096, 160),
    # below 160 GiB (H20, H200): 8192 and 256, 512 at TP 4 or more
    (140, 2, 8192, 256), (140, 4, 8192, 512),
])
def test_sglang_larger_card_defaults_by_tp(gib, tp, chunked, max_bs):
    mb = gib * 1024
    reserved = 512 + chunked * 1.5 + tp / 8 * 1024 + 2 * max_bs
    if gib > 60:
        reserved = max(reserved, 10 * 1024)
    for version in ((0, 5, 3), (0, 5, 22)):
        assert sglang.sglang_default_mem_fraction(gib * GIB, tp=tp, version=version,
                                                  prefill_cuda_graph=False) == \
            round((mb - reserved) / mb, 3)


def test_sglang_048_to_052_reserve_by_gpu_memory():
    # server_args.py 0.4.8-0.5.2 (the 0.4.8, 0.4.9, 0.4.10, 0.5.0rc0, 0.5.1, 0.5.2 wheels):
    # reserved = (2.8 + tp x pp / 10) GiB below 35 GiB, (9.5 + tp x pp / 2) below 90,
    # (12 + tp x pp / 2) below 160, else 32 GiB; +4 GiB with DP attention
    h100 = 85028896768
    mb = h100 / 2**20  # 81,089.9 MiB
    assert sglang.sglang_default_mem_fraction(h100, tp=1, version=(0, 4, 8)) == \
        round((mb - 10 * 1024) / mb, 3) == 0.874
    assert sglang.sglang_default_mem_fraction(h100, tp=8, version=(0, 5, 2)) == \
        round((mb - 13.5 * 1024) / mb, 3) == 0.830
    assert sglang.sglang_default_mem_fraction(24 * GIB, tp=2, version=(0, 4, 10)) == \
        round((24 * 1024 - 3.0 * 1024) / (24 * 1024), 3) == 0.875
    b200 = 182631 * 2**20
    assert sglang.sglang_default_mem_fraction(b200, tp=8, version=(0, 5, 0)) == \
        round((182631 - 32 * 1024) / 182631, 3) == 0.821
    assert sglang.sglang_default_mem_fraction(h100, tp=8, version=(0, 5, 1), dp=8,
                                              dp_attention=True) == \
        round((mb - 17.5 * 1024) / mb, 3) == 0.779


def test_sglang_046_and_047_large_gpu_branches():
    # 0.4.6: the TP table up to 81,920 MiB, else (gpu - 13 GiB) / gpu, unrounded
    h100, h200 = 85028896768, 150754820096  # 81,089.9 and 143,771.4 MiB
    mb200 = h200 / 2**20
    assert sglang.sglang_default_mem_fraction(h100, tp=2, version=(0, 4, 6)) == 0.87
    assert sglang.sglang_default_mem_fraction(h200, tp=2, version=(0, 4, 6)) == \
        pytest.approx((mb200 - 13 * 1024) / mb200, abs=1e-15)
    # 0.4.7: by tp x pp up to 81,920 MiB; above 96 GiB from 0.88,
    # min(0.88 + 48 GiB x 0.12 / gpu, (gpu - 18 GiB) / gpu); above 180,000 MiB on CUDA 0.79
    assert sglang.sglang_default_mem_fraction(h100, tp=2, pp=2, version=(0, 4, 7)) == 0.85
    assert sglang.sglang_default_mem_fraction(h200, tp=8, version=(0, 4, 7)) == pytest.approx(
        min(0.88 + 48 * 1024 * 0.12 / mb200, (mb200 - 18 * 1024) / mb200), abs=1e-15)
    b200 = 182631 * 2**20
    assert sglang.sglang_default_mem_fraction(b200, tp=8, version=(0, 4, 7)) == 0.79
    mi300x = 196592 * 2**20  # ROCm: not is_cuda(), so the 96 GiB branch
    assert sglang.sglang_default_mem_fraction(mi300x, tp=8, version=(0, 4, 7), rocm=True) == \
        pytest.approx(min(0.88 + 48 * 1024 * 0.12 / 196592, (196592 - 18 * 1024) / 196592),
                      abs=1e-15)


def test_sglang_memory_takes_the_weights_off_the_free_memory():
    mem = sglang.sglang_memory(LLAMA8B, 80 * GIB, mem_fraction_static=0.9, dims=LLAMA8B_DIMS)
    assert mem.free_before_load_bytes == 80 * GIB - sglang.SGLANG_INIT_BYTES
    assert mem.free_after_load_bytes == mem.free_before_load_bytes - 8030261248 * 2


def test_sglang_047_to_0410_hold_nccl_connected_before_the_load_on_hgx_hopper():
    """0.4.7-0.4.10.post2 (wheels read): entrypoints/engine.py _set_envs_and_config sets
    NCCL_CUMEM_ENABLE=0 and NCCL_NVLS_ENABLE=0, the wheel pins torch 2.7.1 (NCCL 2.26.2,
    which then connects ring and tree at ncclCommInitRank), and init_torch_distributed makes
    the TP group's pynccl communicator and custom all-reduce before it reads
    min_per_gpu_memory, the pool rule's free memory before the load. 0.4.10 adds the
    _MOE_EP / _MOE_TP groups' communicators (parallel_state.py initialize_model_parallel)."""
    rules = sglang_memory.rules_for
    assert not rules((0, 4, 6)).nccl_connects_at_init  # torch 2.6.0 (NCCL 2.21): not read
    assert rules((0, 4, 7)).nccl_connects_at_init and rules((0, 4, 9)).nccl_connects_at_init
    assert not rules((0, 4, 9)).moe_groups and rules((0, 4, 10)).moe_groups
    assert not rules((0, 5, 0)).nccl_connects_at_init  # torch 2.8.0 (NCCL 2.27): not read
    from kvplan.engines.base import Deployment

    def held(version, tp, gpu_name):  # the board as a deployment on that GPU reads the catalog
        board = Deployment(LLAMA8B).with_gpu(find_gpu(gpu_name)).nvswitch_hopper
        return sglang_memory.sglang_init_bytes(version, tp, nvswitch_hopper=board)

    # NCCL 2.26.2 at four ranks on one NVSwitch node, NVLS off: on each of 24 channels a ring
    # and a tree connection of 2 MiB (ncclSendMem) + 10 MiB (ncclRecvMem, LL 512 KiB, LL128
    # 4,800 KiB, Simple 4 MiB, each in 2 MiB IPC pages), and the proxy's shared buffer of
    # 32 x 16 x 512 KiB; SGLang's custom all-reduce: 8 MiB + meta_size() in 2 MiB pages (10),
    # 8 MiB of IPC buffer, 8 MiB of rank_data; 512 MiB of CUDA context as on one GPU
    communicator = (24 * 2 * (2 + 10) + 32 * 16 // 2) * MIB
    assert held((0, 4, 9), tp=4, gpu_name="H100 SXM") == 512 * MIB + communicator + 26 * MIB
    # 0.4.10 at ep 1: _MOE_TP spans the four TP ranks, a second communicator
    assert held((0, 4, 10), tp=4, gpu_name="H100 SXM") == \
        512 * MIB + 2 * communicator + 26 * MIB
    # two ranks: the tree reuses the ring's connection
    assert held((0, 4, 9), tp=2, gpu_name="NVIDIA H100 80GB HBM3") == \
        512 * MIB + (24 * 12 + 256) * MIB + 26 * MIB
    # elsewhere: one GPU, a PCIe board, another release
    assert held((0, 4, 9), tp=1, gpu_name="H100 SXM") == sglang.SGLANG_INIT_BYTES
    assert held((0, 4, 9), tp=4, gpu_name="L4") == sglang.SGLANG_INIT_BYTES
    assert held((0, 4, 6), tp=4, gpu_name="H100 SXM") == sglang.SGLANG_INIT_BYTES


def test_sglang_0492_tp4_pool_from_nccl_held_before_the_load():
    """vllm-project/vllm#21348 (tests/fixtures/launch/index.yaml): Qwen3-235B-A22B-FP8 on four
    H100s under 0.4.9.post2, --mem-fraction-static 0.93. The pool is free_after -
    free_before x (1 - 0.93) with free_after = free_before - weights, i.e. free_before x 0.93
    - weights: the 858 MiB NCCL and the custom all-reduce hold before the load cost the pool
    858 x 0.93 MiB = 836,700,733 bytes, 17,384.9 tokens of 48,128 bytes (94 layers x 1 KV
    head a rank x 256 x 2): the 396,340 tokens kvplan planned without them become 378,955
    (each count rounded down) against the 367,404 logged (docs/engine-accuracy.md section 9)."""
    from kvplan.sources.library import resolve

    spec = resolve("qwen3-235b-a22b")
    h100 = find_gpu("h100")
    common = dict(tp=4, version=(0, 4, 9), mem_fraction_static=0.93, weights="fp8")
    hopper = sglang.sglang_memory(spec, h100.memory_bytes, nvswitch_hopper=True, **common)
    other = sglang.sglang_memory(spec, h100.memory_bytes, nvswitch_hopper=False, **common)
    assert other.free_before_load_bytes - hopper.free_before_load_bytes == 858 * MIB
    assert hopper.held_before_load_bytes == (512 + 858) * MIB

    def pool(m):
        return m.free_after_load_bytes - m.free_before_load_bytes * (1 - 0.93)

    assert 94 * 256 * 2 == 48128
    assert abs((pool(other) - pool(hopper)) / 48128 - 17384.9) < 0.05
    # the engine reads the board from the deployment's GPU (the catalog's interconnect): the
    # HGX H100 holds the 858 MiB, the PCIe card of the same chip does not
    from kvplan.engines.base import Deployment
    from kvplan.engines.registry import get

    dep = Deployment(spec, engine="sglang", engine_version="0.4.9", tp=4,
                     memory_fraction=0.93, weights_dtype="fp8")
    notes = {name: " ".join(get("sglang").capacity(dep.with_gpu(find_gpu(name))).notes)
             for name in ("H100 SXM", "H100 PCIe")}
    assert "NCCL's buffers, connected at init" in notes["H100 SXM"]
    assert "NCCL" not in notes["H100 PCIe"]


def test_sglang_default_fraction_of_a_multimodal_model_follows_its_vision_tower():
    # Kimi-K2.5's config.json: MoonViT with vt_num_hidden_layers 27, vt_hidden_size 1152.
    # server_args.py adjust_mem_fraction_for_vlm: x 0.95 x clamp(1 - 0.1 x (ratio - 1), 0.8,
    # 1.05), ratio = 27 x 1152^2 / (24 x 1024^2) = 1.423828125; the MI355X's text default is
    # 0.908, and the 0.5.8.post1 log (sglang-kimi-k25-mi355x-tp8-0.5.8.post1.log) prints
    # mem_fraction_static=0.8260405859375 for the default it took
    from pathlib import Path

    from kvplan.sources.hfconfig import load_config_file
    spec = load_config_file(Path(__file__).parents[3] / "tests/fixtures/hf-configs/families/"
                            "moonshotai--Kimi-K2.5.json")
    assert spec.traits.sglang_vit == (27, 1152)
    mi355x = find_gpu("mi355x").memory_bytes
    text = sglang.sglang_default_mem_fraction(mi355x, tp=8, version=(0, 5, 8), mla=True)
    assert text == 0.908
    vlm = sglang.sglang_default_mem_fraction(mi355x, tp=8, version=(0, 5, 8), mla=True,
                                             vit=spec.traits.sglang_vit)
    assert vlm == pytest.approx(0.8260405859375, abs=1e-12)
    # a tower 5 x ViT-L/14's size is held at the floor (0.8); one smaller than it at 1.05
    assert sglang.sglang_default_mem_fraction(mi355x, tp=8, version=(0, 5, 8),
                                              vit=(120, 1024)) == pytest.approx(0.908 * 0.76)
    assert sglang.sglang_default_mem_fraction(mi355x, tp=8, version=(0, 5, 8),
                                              vit=(6, 1024)) == pytest.approx(0.908 * 0.9975)
    # the rule is first in the 0.4.10 wheel: 0.4.9 keeps its reserve table's figure, an H100
    # at TP 8 round((81,089.9 - 13.5 x 1024) / 81,089.9, 3) = 0.830
    h100 = 85028896768
    assert sglang.sglang_default_mem_fraction(h100, tp=8, version=(0, 4, 9),
                                              vit=(27, 1152)) == 0.830
    assert sglang.sglang_default_mem_fraction(h100, tp=8, version=(0, 4, 10), vit=(27, 1152)) \
        == pytest.approx(0.830 * 0.909736328125)


def _config(name):
    from pathlib import Path

    from kvplan.sources.hfconfig import load_config_file
    root = Path(__file__).parents[3] / "tests/fixtures/hf-configs"
    path = root / name if (root / name).exists() else root / "families" / name
    return load_config_file(path)


@pytest.mark.parametrize("fixture, vit", [
    # vision_config num_hidden_layers 32, hidden_size 1280: MllamaVisionConfig keeps both
    ("meta-llama--Llama-3.2-90B-Vision-Instruct.json", (32, 1280)),
    # LLaVA 1.5's CLIPVisionConfig: num_hidden_layers 24, hidden_size 1024
    ("llava-hf--llava-1.5-7b-hf.json", (24, 1024)),
    # Qwen2.5-VL's vision_config: depth 32, hidden_size 1280. Qwen2_5_VLVisionConfig (transformers
    # 4.57 and 5.19) has no num_hidden_layers, so getattr's default 24; hidden_size as written
    ("Qwen--Qwen2.5-VL-7B-Instruct.json", (24, 1280)),
    # Qwen2-VL's vision_config: depth 32, embed_dim 1280, hidden_size 3584 (the merger's
    # output): 24 and 3584
    ("Qwen--Qwen2-VL-7B-Instruct.json", (24, 3584)),
    # Qwen3-VL / Qwen3.5: depth 27, hidden_size 1152; EXAONE 4.5: depth 28, hidden_size 2048
    ("Qwen--Qwen3-VL-8B-Instruct.json", (24, 1152)),
    ("Qwen--Qwen3.5-27B.json", (24, 1152)),
    ("LGAI-EXAONE--EXAONE-4.5-33B.json", (24, 2048)),
    # Gemma 4's Gemma4VisionConfig: num_hidden_layers 27, hidden_size 1152
    ("google--gemma-4-31B-it.json", (27, 1152)),
])
def test_the_vision_tower_sglang_scales_its_default_by(fixture, vit):
    # ServerArgs.adjust_mem_fraction_for_vlm: getattr(vision_config, "num_hidden_layers", 24),
    # getattr(vision_config, "hidden_size", 1024) (server_args.py 0.4.10; memory_hook.py 0.5.23)
    assert _config(fixture).traits.sglang_vit == vit


# adjust_mem_fraction_for_vlm's factor, by hand: 0.95 x clamp(1 - 0.1 x (ratio - 1), 0.8, 1.05),
# ratio = layers x hidden^2 / (24 x 1024^2)
QWEN2_VL = 0.95 * 0.8  # ratio 3584^2 / 1024^2 = 12.25: 1 - 1.125 < 0.8, the floor
QWEN2_5_VL = 0.95 * (1 - 0.1 * (1280**2 / 1024**2 - 1))  # ratio 1.5625: 0.8965625
QWEN3_VL = 0.95 * (1 - 0.1 * (1152**2 / 1024**2 - 1))  # ratio 1.265625: 0.924765625
GEMMA4 = 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1))  # 1.423828125: 0.909736328125


def test_the_vlm_factors_by_hand():
    assert QWEN2_VL == pytest.approx(0.76, abs=1e-15)
    assert QWEN2_5_VL == pytest.approx(0.8965625, abs=1e-15)
    assert QWEN3_VL == pytest.approx(0.924765625, abs=1e-15)
    assert GEMMA4 == pytest.approx(0.909736328125, abs=1e-15)


@pytest.mark.parametrize("fixture, version, factor", [
    # 0.4.10 lists Qwen2VLForConditionalGeneration and Qwen2_5_VLForConditionalGeneration in
    # configs/model_config.py multimodal_model_archs; the classic TP-1 default is 0.88
    ("Qwen--Qwen2-VL-7B-Instruct.json", "0.4.10", QWEN2_VL),
    ("Qwen--Qwen2.5-VL-7B-Instruct.json", "0.4.10", QWEN2_5_VL),
    ("Qwen--Qwen2.5-VL-7B-Instruct.json", "0.4.9", 1.0),  # no adjust_mem_fraction_for_vlm yet
    # Qwen3VLForConditionalGeneration: first in the 0.5.3 list, not in 0.5.2's
    ("Qwen--Qwen3-VL-8B-Instruct.json", "0.5.2", 1.0),
    ("Qwen--Qwen3-VL-8B-Instruct.json", "0.5.3", QWEN3_VL),
    ("Qwen--Qwen3-VL-30B-A3B-Instruct.json", "0.5.3", QWEN3_VL),  # Qwen3VLMoe..., 0.5.3 too
    # Qwen3_5ForConditionalGeneration: first in 0.5.9's list
    ("Qwen--Qwen3.5-27B.json", "0.5.8", 1.0),
    ("Qwen--Qwen3.5-27B.json", "0.5.9", QWEN3_VL),
    # Gemma4ForConditionalGeneration: first in 0.5.11's list, not in 0.5.10's
    ("google--gemma-4-31B-it.json", "0.5.10", 1.0),
    ("google--gemma-4-31B-it.json", "0.5.11", GEMMA4),
    # Exaone4_5_ForConditionalGeneration: in no list through 0.5.23
    ("LGAI-EXAONE--EXAONE-4.5-33B.json", "0.5.23", 1.0),
    ("LGAI-EXAONE--EXAONE-4.5-33B.json", None, 1.0),
])
def test_sglang_default_fraction_of_each_multimodal_config(fixture, version, factor):
    # an 80 GiB GPU at TP 1 from 0.5: chunked_prefill_size 8192 and cuda_graph_max_bs 256
    # (< 90 GiB), reserved = 512 + 8192 x 1.5 + 1/8 x 1024 + 2 x 256 = 13,440 MiB (over the
    # 10 GiB floor): round((81920 - 13440) / 81920, 3) = 0.836 from 0.5.3. 0.5.10 on
    # add their prefill CUDA graphs: 58 graphs x 8 MB = 464 MB more, 13,904 MiB: 0.830
    # 0.4.8-0.5.2 reserve 9.5 + 1 / 2 = 10 GiB below 90 GiB: round((81920 - 10240) / 81920, 3)
    # = 0.875
    spec = _config(fixture)
    parsed = None if version is None else tuple(int(x) for x in version.split("."))
    # a model the release lists as multimodal (factor != 1 here) has its prefill graphs
    # switched off in 0.5.10-0.5.21 (_handle_piecewise_cuda_graph "Multimodal / VLM
    # models"); one it does not list keeps them from 0.5.10
    graphs = (parsed is None or parsed >= (0, 5, 10)) and factor == 1.0
    text = 0.875 if parsed is not None and parsed < (0, 5, 3) else \
        0.830 if graphs else 0.836
    got = sglang.ENGINE.defaults(spec, gpu_memory_bytes=80 * GIB, version=version)
    assert got["mem_fraction_static"] == pytest.approx(text * factor, abs=1e-12)


def test_a_vision_tower_kvplan_does_not_read_is_said():
    # GLM-4.5V's vision_config (glm4v_moe: depth 24, hidden_size 1536) is not laid out; SGLang
    # 0.5.1 on lists Glm4vMoeForConditionalGeneration and would scale its default by
    # 0.95 x 0.875: kvplan says its default is the text model's
    spec = _config("zai-org--GLM-4.5V.json")
    assert spec.vision is None and sglang_memory.sglang_vit(spec, None) == ()
    note, = sglang_memory.vlm_unread_note(spec, None)
    assert "vision_config" in note and "--mem-fraction-static" in note
    assert sglang_memory.vlm_unread_note(spec, 0.8) == ()
    assert sglang_memory.vlm_unread_note(_config("Qwen--Qwen3-VL-8B-Instruct.json"), None) == ()


def test_sglang_prefill_graph_reserve_from_0510_and_the_cases_that_drop_it():
    # server_args.py _handle_gpu_memory_settings (0.5.10 wheel): on an H100 (81,089.9 MiB)
    # at TP 1, reserved = 512 + 8,192 x 1.5 + 1 / 8 x 1,024 + 2 x 256 + 58 graph sizes x 8 MB
    # = 13,904 MB -> round((81,089.9 - 13,904) / 81,089.9, 3) = 0.829; without the graphs'
    # 464 MB, 13,440 -> 0.834; 0.5.9 never reserves them
    from kvplan.sources.hfconfig import load_config_file
    h100 = find_gpu("h100").memory_bytes
    mb = h100 / MIB
    with_graphs = round((mb - 13904) / mb, 3)
    without = round((mb - 13440) / mb, 3)
    assert (with_graphs, without) == (0.829, 0.834)
    spec = LLAMA8B
    on = sglang_memory.prefill_graphs_on
    for v in ((0, 5, 10), (0, 5, 15), (0, 5, 22)):
        assert on(spec, v) and sglang.sglang_default_mem_fraction(
            h100, version=v, prefill_cuda_graph=on(spec, v)) == with_graphs
    assert not on(spec, (0, 5, 9)) and sglang.sglang_default_mem_fraction(
        h100, version=(0, 5, 9)) == without
    # 0.5.10-0.5.14 (server_args.py _handle_piecewise_cuda_graph, then
    # _disable_tc_piecewise_cudagraph_if_incompatible): DP attention and pp_size > 1 switch
    # them off; an AMD GPU (is_hip) has them off in every release (from 0.5.22
    # default_prefill_backend is DISABLED off CUDA)
    for v in ((0, 5, 10), (0, 5, 14)):
        assert not on(spec, v, pp=2) and not on(spec, v, dp_attention=True)
    assert not any(on(spec, (0, 5, m), rocm=True) for m in range(10, 24))
    # 0.5.15-0.5.18: breakable graphs on CUDA, which keep them with pp_size > 1; 0.5.15 and
    # 0.5.16 still drop them for DP attention, 0.5.17 no longer
    assert on(spec, (0, 5, 15), pp=2) and on(spec, (0, 5, 18), pp=2)
    assert not on(spec, (0, 5, 16), dp_attention=True) and on(spec, (0, 5, 17), dp_attention=True)
    # from 0.5.19 apply_cuda_graph_compatibility turns breakable ones off for pp_size > 1
    assert not on(spec, (0, 5, 19), pp=2) and not on(spec, (0, 5, 23), pp=2)
    assert on(spec, (0, 5, 23), dp_attention=True)
    root = Path(__file__).parents[3] / "tests/fixtures/hf-configs"
    # a multimodal model (Qwen2_5_VLForConditionalGeneration, in multimodal_model_archs and
    # in neither allowlist) has them off in every release
    vl = load_config_file(root / "families/Qwen--Qwen2.5-VL-7B-Instruct.json")
    assert not any(on(vl, (0, 5, m)) for m in range(10, 24))
    # Qwen3.5 (Qwen3_5ForConditionalGeneration): in the breakable allowlist from 0.5.16
    q35 = load_config_file(root / "families/Qwen--Qwen3.5-27B.json")
    assert not on(q35, (0, 5, 15)) and on(q35, (0, 5, 16)) and on(q35, (0, 5, 23))
    # piecewise_cuda_graph_disabled_model_archs: Qwen3NextForCausalLM through 0.5.14 (the
    # breakable rules of 0.5.15 on do not name it); DeepseekV32ForCausalLM and
    # GlmMoeDsaForCausalLM in 0.5.10-0.5.12, not 0.5.13
    nxt = load_config_file(root / "families/Qwen--Qwen3-Next-80B-A3B-Instruct.json")
    assert not on(nxt, (0, 5, 10)) and not on(nxt, (0, 5, 14)) and on(nxt, (0, 5, 15))
    dsa = load_config_file(root / "deepseek-ai--DeepSeek-V3.2.json")
    assert not on(dsa, (0, 5, 12)) and on(dsa, (0, 5, 13))
    # breakable: every MLA model off in 0.5.15-0.5.16, MLA without DSA in 0.5.17, neither
    # from 0.5.18
    assert not on(dsa, (0, 5, 16)) and on(dsa, (0, 5, 17)) and on(dsa, (0, 5, 18))
    # the MLA reserve is 1.5 GiB: 512 + 12,288 + 128 + 512 + 1,536 = 14,976 MB on the H100
    assert sglang.sglang_default_mem_fraction(
        h100, version=(0, 5, 13), mla=True,
        prefill_cuda_graph=on(dsa, (0, 5, 13))) == round((mb - 14976) / mb, 3) == 0.815
