"""Which vLLM releases serve an architecture (kvplan/data/vllm-served.txt, derived by
scripts/vllm_registry_history.py from registry.py of each release): a release that no longer
lists the config's class, or does not list it yet, is refused by name in every command that
plans; `size` stays engine-agnostic."""

import json
import sys

import pytest
from paths import FIXTURES, ROOT
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError
from kvplan.engines.vllm.served import check_served, last_serving, served
from kvplan.sources.hfarch import vllm_registry

runner = CliRunner()
M1 = str(FIXTURES / "hf-configs" / "families" / "MiniMaxAI--MiniMax-M1.json")
GONE = ("vLLM 0.33 no longer serves MiniMaxM1ForCausalLM (removed in 0.24; the Transformers "
        "backend it would try instead is not modelled); give --engine-version 0.23 or earlier")


def test_the_four_classes_vllm_dropped_are_gone_from_0_24():
    # vLLM 0.24.0-0.33.0 registry.py _PREVIOUSLY_SUPPORTED_MODELS: each "0.23.0", the last
    # release whose _TEXT_GENERATION_MODELS lists it (0.23.0's registry.py still maps
    # MiniMaxM1ForCausalLM to minimax_text_01 and BambaForCausalLM to bamba; 0.24.0's does not)
    table = served()[1]
    for name in ("MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM", "MiniMaxForCausalLM",
                 "BambaForCausalLM"):
        assert table[name].removed == (0, 24, 0), name
        assert table[name].serves((0, 23, 0)) and not table[name].serves((0, 24, 0))
    # added: 0.9.2's registry is the first to list MiniMaxM1ForCausalLM, 0.7.3's BambaForCausalLM
    assert table["MiniMaxM1ForCausalLM"].added == (0, 9, 2)
    assert table["BambaForCausalLM"].added == (0, 7, 3)


def test_every_class_of_the_0_33_registry_is_served_at_0_33():
    # the two data files agree: kvplan/data/vllm-registry.txt is 0.33.0's registry
    version, entries = vllm_registry()
    releases, table = served()
    assert releases[-1] == (0, 33, 0) and version == "0.33.0"
    assert all(table[e.name].serves((0, 33, 0)) for e in entries)
    gone = {n for n, s in table.items() if s.removed is not None}
    assert not gone & {e.name for e in entries}
    assert {"MiniMaxM1ForCausalLM", "BambaForCausalLM"} <= gone


@pytest.mark.parametrize("version, message", [
    ((0, 33), GONE),
    ((0, 24, 0), "vLLM 0.24 no longer serves MiniMaxM1ForCausalLM (removed in 0.24; the "
                 "Transformers backend it would try instead is not modelled); give "
                 "--engine-version 0.23 or earlier"),
    ((0, 9, 1), "vLLM 0.9.1 does not serve MiniMaxM1ForCausalLM yet (added in 0.9.2); "
                "give --engine-version 0.9.2 or later"),
])
def test_a_release_that_does_not_serve_the_class_is_refused(version, message):
    with pytest.raises(BadInputError) as err:
        check_served(("MiniMaxM1ForCausalLM",), version)
    assert str(err.value) == message


def test_a_class_served_then_or_unknown_to_every_release_passes():
    for version in ((0, 9, 2), (0, 22), (0, 23, 0)):
        check_served(("MiniMaxM1ForCausalLM",), version)
    # listed by 0.6.3, the oldest release read: no earlier release is refused
    check_served(("LlamaForCausalLM",), (0, 2, 0))
    # a class no release lists (a plugin's) is left to the readers
    check_served(("SomePluginForCausalLM",), (0, 33))
    # one served class of several is enough
    check_served(("MiniMaxM1ForCausalLM", "MiniMaxM2ForCausalLM"), (0, 33))


def test_plan_refuses_minimax_m1_on_0_33_in_one_line():
    out = runner.invoke(app, ["plan", M1, "--engine", "vllm", "--engine-version", "0.33",
                              "--gpu", "h200", "--tp", "8"])
    assert out.exit_code == 2
    assert out.stderr.strip() == f"kvplan: error: {GONE}"


def test_from_command_refuses_it_too():
    out = runner.invoke(app, ["plan", M1, "--gpu", "h200", "--from-command",
                              "vllm serve MiniMaxAI/MiniMax-M1-80k -tp 8"])
    assert out.exit_code == 2, out.output
    assert "no longer serves MiniMaxM1ForCausalLM (removed in 0.24;" in out.stderr


def test_check_refuses_it(tmp_path):
    plan = tmp_path / "capacity.yaml"
    plan.write_text(f"""schema: kvplan.capacity/1
deployments:
  - name: m1
    model: {M1}
    gpu: h200
    count: 8
    tp: 8
    engine: {{name: vllm, version: "0.33"}}
    max_model_len: 32k
    requires:
      min_concurrency: {{concurrency: 1, context: 32k}}
""")
    out = runner.invoke(app, ["check", str(plan)])
    assert out.exit_code == 2, out.output
    assert "no longer serves MiniMaxM1ForCausalLM" in out.output


def test_minimax_m1_plans_on_0_23_by_hand():
    # MiniMax-M1 (the fixture): 80 layers, attn_type_list has 10 full-attention layers (1) and
    # 70 lightning layers (0); 64 heads, 8 KV heads, head_dim 128, bf16. At TP 8 a GPU holds
    # 1 KV head and 8 lightning heads. vLLM's hybrid layout (kv_cache_utils.py, 0.23): 8 groups
    # of 10 layers (1 attention, 7 lightning); the lightning state is 8 x 128 x 128 x 2 bytes
    # = 262,144 bytes, and an attention block of 512 tokens is 512 x 2 x 1 x 128 x 2 = 262,144
    # bytes; a block id holds 10 layers' pages: 2,621,440 bytes.
    # 20 GiB / 2,621,440 = 8,192 blocks. A request of 32,768 tokens holds cdiv(32768, 512) =
    # 64 attention blocks and one state block in each of the 7 lightning groups: 71 blocks.
    # (8,192 - 1 null block) // 71 = 115 requests.
    args = ["plan", M1, "--engine", "vllm", "--gpu", "h200", "--tp", "8",
            "--kv-memory", "20GiB", "--max-model-len", "32768", "--format", "json"]
    for version in ("0.23", "0.22"):
        out = runner.invoke(app, [*args, "--engine-version", version])
        assert out.exit_code == 0, out.output
        result = json.loads(out.stdout)
        assert result["engine"]["bytes_per_block"] == 2_621_440
        assert result["engine"]["num_blocks"] == 8_192
        assert result["engine"]["blocks_per_request"] == 71
        assert result["answer"]["max_concurrency"] == 115


def test_size_stays_engine_agnostic():
    out = runner.invoke(app, ["size", M1, "--tokens", "32k"])
    assert out.exit_code == 0, out.output


def test_the_history_script_derives_added_and_removed(tmp_path):
    # three made-up releases of registry.py: A throughout, B added in 0.2.0 and removed in
    # 0.3.0, C added in 0.3.0; a pooling table is not read
    def registry(version, names):
        path = tmp_path / f"{version}.py"
        rows = "".join(f'    "{n}": ("m", "{n}"),\n' for n in names)
        path.write_text(f"_TEXT_GENERATION_MODELS = {{\n{rows}}}\n"
                        '_EMBEDDING_MODELS = {"E": ("m", "E")}\n')
        return f"{version}={path}"

    sys.path.insert(0, str(ROOT / "scripts"))
    import vllm_registry_history

    text = vllm_registry_history.history([vllm_registry_history._source(a) for a in (
        registry("0.3.0", ["A", "C"]), registry("0.1.0", ["A"]), registry("0.2.0", ["A", "B"]))])
    rows = [line for line in text.splitlines() if not line.startswith("#")]
    assert rows == ["releases 0.1.0 0.2.0 0.3.0", "newest 0.3.0",
                    "A <=0.1.0 - text", "B 0.2.0 0.3.0 text", "C 0.3.0 - text"]


def test_a_transformers_backend_class_is_not_refused_before_it_was_listed():
    # Olmo2ForCausalLM: first listed by 0.6.5 (olmo2.py), in 0.33's Transformers-backend table;
    # an older release's Transformers fallback may serve it: no "added in" refusal
    table = served()[1]
    assert table["Olmo2ForCausalLM"].table == "transformers"
    assert table["Olmo2ForCausalLM"].added == (0, 6, 5)
    check_served(("Olmo2ForCausalLM",), (0, 6, 4))


def test_the_last_release_serving_a_dropped_class():
    # 0.23.0 lists MiniMaxM1ForCausalLM, 0.24.0 does not; 0.33.0 lists MiniMaxM2ForCausalLM
    assert last_serving(("MiniMaxM1ForCausalLM",)) == (0, 23, 0)
    assert last_serving(("MiniMaxM2ForCausalLM",)) is None
    assert last_serving(("SomePluginForCausalLM",)) is None


def test_a_renamed_class_names_its_new_spelling():
    # registry.py: 0.9.2-0.10.0 list Ernie4_5_ForCausalLM; from 0.10.1 Ernie4_5ForCausalLM
    with pytest.raises(BadInputError) as err:
        check_served(("Ernie4_5_ForCausalLM",), (0, 33))
    assert "(removed in 0.10.1, now as Ernie4_5ForCausalLM: write that in config.json's " \
        "architectures;" in str(err.value)
    with pytest.raises(BadInputError) as err:
        check_served(("MiniMaxM1ForCausalLM",), (0, 33))
    assert "now as" not in str(err.value)
