"""The library is reproducible from the real configs: where a library model's source config.json
is a test fixture, reading that config gives exactly the library's layers.

(The Hub revision of some fixtures differs from the library's source in fields that do not
shape the cache, e.g. token ids; only the layers, dtype-independent, are compared.)
"""

from pathlib import Path

import pytest

from kvplan.sources.hfconfig import load_config_file
from kvplan.sources.library import load_library

CONFIGS = Path(__file__).parent / "fixtures" / "hf-configs"
# Where the fixture file name differs from "<org>--<name>" of the library's source repo.
RENAMED = {
    "meta-llama/Llama-3.1-405B": "meta-llama--Meta-Llama-3.1-405B.json",
    "meta-llama/Llama-3.1-70B": "meta-llama--Meta-Llama-3.1-70B.json",
}


def _pairs():
    for spec in load_library():
        repo = spec.source.repo
        if not repo:
            continue
        path = CONFIGS / RENAMED.get(repo, repo.replace("/", "--") + ".json")
        if path.is_file():
            yield pytest.param(spec, path, id=spec.name)


PAIRS = list(_pairs())


def test_most_of_the_library_has_its_config_as_a_fixture():
    assert len(PAIRS) >= 40


@pytest.mark.parametrize(("spec", "path"), PAIRS)
def test_config_reproduces_library_layers(spec, path):
    assert load_config_file(path).layers == spec.layers
