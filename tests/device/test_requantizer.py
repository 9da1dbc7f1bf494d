"""The requantizer: the narrow shifter's parts against the contract, and the DSP blocks of the
ECP5's pipelined requantization."""

import re

import numpy as np
import pytest
from amaranth.sim import Simulator

from hwgen.config import AcceleratorConfig
from hwgen.device.accelerator import Accelerator
from hwgen.generate import emit_verilog
from hwgen.implementation import Implementation
from hwgen.nn import requantize


@pytest.mark.parametrize("registered", [False, True], ids=["comb", "pipelined"])
def test_narrow_requantization_matches_the_reference(registered):
    """The requantization built from a narrow shifter and an overflow flag equals the
    reference's full-width one, for every shift (past the product's width too) and products
    at the rounding and saturation boundaries."""
    from amaranth.hdl import Module, Signal, signed, unsigned

    from hwgen.device.requantizer import (
        round_saturate,
        rounded,
        scaled,
        shift_end,
        shift_stages,
        shift_start,
    )

    out_bits, prod_bits = 8, 20
    m = Module()
    prod, shift = Signal(signed(prod_bits)), Signal(unsigned(5))
    out = Signal(signed(out_bits))
    if registered:
        # As the post-processing pipeline splits it: the shifter in two parts (the pipeline
        # registers between them), rounding apart from saturation.
        sign, split = prod[-1], 2
        value, over = shift_start(prod, 5, out_bits)
        for name, stages in (("a", range(4, split - 1, -1)), ("b", range(split - 1, -1, -1))):
            value, over = shift_stages(m, value, over, shift, sign=sign, stages=stages,
                                        out_bits=out_bits, name=name)
        over = shift_end(value, over, sign)
        m.d.comb += out.eq(round_saturate(None, over, sign, out_bits,
                                           rounded_=rounded(value.as_signed())))
    else:
        t, over = scaled(m, prod, shift, out_bits)
        m.d.comb += out.eq(round_saturate(t, over, prod[-1], out_bits))
    rng = np.random.default_rng(5)
    lim = 1 << (prod_bits - 1)
    cases = {(int(v), s) for s in range(32) for v in rng.integers(-lim, lim, 24)}
    for s in range(32):
        for edge in (127.5, 128, -128.5, -129, 255.5, -256.5, 0.5, -0.5):
            for d in (-1, 0, 1):
                v = int(edge * (1 << s)) + d
                if -lim <= v < lim:
                    cases.add((v, s))
    cases |= {(v, s) for v in (-lim, lim - 1, 0, 1, -1) for s in range(32)}
    sim = Simulator(m)
    seen = []

    async def bench(ctx):
        for v, s in sorted(cases):
            ctx.set(prod, v)
            ctx.set(shift, s)
            seen.append((v, s, ctx.get(out)))

    sim.add_testbench(bench)
    sim.run()
    vals = np.array([v for v, _, _ in seen], dtype=np.int64)
    shifts = np.array([s for _, s, _ in seen], dtype=np.int64)
    want = requantize(vals, 1, shifts, out_bits)
    got = np.array([g for _, _, g in seen], dtype=np.int64)
    assert len(seen) > 1000
    bad = [(v, s, g, w) for (v, s, g), w in zip(seen, want, strict=True) if g != w]
    assert not bad, bad[:10]
    np.testing.assert_array_equal(got, want)

@pytest.mark.parametrize(("mult_bits", "in_dsp"), [(16, True), (18, False)])
def test_ecp5_requantization_products_use_the_dsp_registers(mult_bits, in_dsp):
    """With the ECP5 options each requantization slice product is a MULT18X18D whose input and
    output registers are on, clocked only when the datapath is (the gate-level smoke build runs
    it against the reference); operands wider than the block keep the fabric's registers."""
    cfg = AcceleratorConfig(rows=2, cols=3, acc_bits=32, mult_bits=mult_bits)
    acc = Accelerator(cfg, Implementation(dsp_packing="mult18x18d", post_pipeline=True,
                                          split_operand=17, registered_reads=True))
    verilog = emit_verilog(acc, "acc")
    blocks = {name: body for name, body in re.findall(r"module (\S+)(.*?)endmodule", verilog, re.S)
              if "MULT18X18D #(" in body}
    requant = [body for name, body in blocks.items() if ".rq_mul" in name]
    assert len(blocks) == 6 + len(requant)               # the array's 6 cells...
    assert len(requant) == (6 if in_dsp else 0)          # ...and 3 lanes x 2 slices
    for body in blocks.values():
        for reg in ("INPUTA", "INPUTB", "OUTPUT"):
            assert f'.REG_{reg}_CLK("CLK0")' in body
    # The requantization's blocks hold still with the datapath (the array's run freely).
    for body in requant:
        assert ".CE0(ce)" in body
    enables = [re.search(r"\.ce\(([^)]*)\)", pins)[1]
               for pins in re.findall(r"\S +rq_mul\d+_\d+ \((.*?)\);", verilog, re.S)]
    assert len(enables) == len(requant)
    assert all(e.strip() not in ("1'h1", "1'h0") for e in enables), enables
