"""The registry of top-level designs (``hwgen.generate.TOPS``): every registered top builds
for a small configuration, has a signature, and converts to the same RTLIL twice (the Verilog
``hwgen generate`` writes is deterministic for every top, not only the default one)."""

import pytest
from amaranth.back import rtlil
from amaranth.lib import wiring
from support import TINY

from hwgen.generate import DEFAULT_TOP, TOPS, build_top


def test_default_top_is_registered():
    assert DEFAULT_TOP in TOPS


@pytest.mark.parametrize("top", sorted(TOPS))
def test_every_top_converts_deterministically(top):
    texts = []
    for _ in range(2):
        component = build_top(TINY, top)
        assert isinstance(component, wiring.Component)
        assert list(component.signature.members), top     # every port declared
        texts.append(rtlil.convert(component, name="top", emit_src=False))
    assert texts[0] == texts[1], top


def test_unknown_top_names_the_registered_ones():
    with pytest.raises(ValueError, match=r"top='nope' is not a design; allowed: .*device"):
        build_top(TINY, "nope")
