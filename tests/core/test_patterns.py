"""kvplan.core.patterns.lazy: a pattern compiled on its first use answers as re.compile's."""

import re

from kvplan.core.patterns import LazyPattern, lazy


def test_a_lazy_pattern_compiles_on_first_use_and_answers_as_the_compiled_one():
    text = "name: a\nName: b\nname:c"
    p = lazy(r"^name:\s*(\w+)$", re.M | re.I)
    assert isinstance(p, LazyPattern) and p._compiled is None  # nothing compiled at import
    compiled = re.compile(r"^name:\s*(\w+)$", re.M | re.I)
    assert p.findall(text) == compiled.findall(text) == ["a", "b", "c"]
    assert p._compiled is not None
    assert p.match(text, 8).group(1) == compiled.match(text, 8).group(1) == "b"
    assert p.sub("x", text) == compiled.sub("x", text)
    assert (p.pattern, p.flags) == (compiled.pattern, compiled.flags)

