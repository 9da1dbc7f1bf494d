"""Vendor DSP primitives for the multipliers of the processing elements.

The iCE40UP5K has eight SB_MAC16 blocks. Inferred multipliers use one block per product, which
caps a UP5K array at 8 MACs; in its two-8x8 mode one SB_MAC16 computes two independent signed
8x8 products, so two processing elements can share it and a 4x4 int8 array fits the chip.

The wrappers here instantiate the primitive itself, so what the tests simulate (the primitive's
model from Yosys, ``share/ice40/cells_sim.v``) is what the build maps.

On the ECP5, Yosys maps a multiplication onto a MULT18X18D but leaves the registers around it
in the fabric, so the multiplier's delay sits inside a fabric-to-fabric path (the critical path
of an inferred array; docs/performance.md has the figures). :class:`ECP5Mul` uses the block's
own input and output registers instead. Yosys ships no simulation model of MULT18X18D, only a
black box; the tests use a behavioural model written from the Lattice ECP5 sysDSP usage guide.
"""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, ResetSignal, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..implementation import DSP_OPERAND_BITS, SB_MAC16_OPERAND_BITS, DspPacking

__all__ = ["DSP_PACKINGS", "MUL_PAIR_LATENCY", "ECP5Mul", "ICE40MulPair"]

#: Values of the ``dsp_packing`` option of the arrays: ``None`` (inferred multipliers) or the
#: value of a :class:`~hwgen.implementation.DspPacking`: ``"sb_mac16"`` (two processing
#: elements of one column share an iCE40 SB_MAC16) or ``"mult18x18d"`` (one ECP5 MULT18X18D
#: per element, with its input and output registers).
DSP_PACKINGS = (None, *(packing.value for packing in DspPacking))

#: Cycles from the operands to the products of :class:`ICE40MulPair` and :class:`ECP5Mul`.
MUL_PAIR_LATENCY = 2

# The SB_MAC16 takes two 8-bit halves per 16-bit port; the MULT18X18D 18-bit operands.
_HALF = SB_MAC16_OPERAND_BITS
_ECP5_WIDTH = DSP_OPERAND_BITS


class ICE40MulPair(wiring.Component):
    """Two registered signed products in one SB_MAC16 (two-8x8 mode).

    The operands are captured by the block's input registers and the products by its 8x8
    product registers, so ``p0``/``p1`` show ``a0 * b0`` and ``a1 * b1`` two cycles after the
    operands are presented, and no fabric path goes through the multiplier. Both halves of the
    block multiply signed operands: in 8x8 mode ``A_SIGNED``/``B_SIGNED`` sign-extend the low
    halves too (checked against ``cells_sim.v`` over all 65536 operand pairs).

    Parameters
    ----------
    a_bits, b_bits : int
        Signed operand widths, at most 8 each; narrower operands are sign-extended.

    Members
    -------
    a0, a1 : In(signed(a_bits))
    b0, b1 : In(signed(b_bits))
    p0, p1 : Out(signed(a_bits + b_bits))
        ``a0 * b0`` and ``a1 * b1``, :data:`MUL_PAIR_LATENCY` cycles later.
    """

    def __init__(self, a_bits=8, b_bits=8):
        for name, bits in (("a_bits", a_bits), ("b_bits", b_bits)):
            if not isinstance(bits, int) or not 2 <= bits <= _HALF:
                raise ValueError(f"{name}={bits!r} is not supported by the SB_MAC16 8x8 mode; "
                                 f"allowed: 2..{_HALF}")
        super().__init__({
            "a0": In(signed(a_bits)), "a1": In(signed(a_bits)),
            "b0": In(signed(b_bits)), "b1": In(signed(b_bits)),
            "p0": Out(signed(a_bits + b_bits)), "p1": Out(signed(a_bits + b_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        out = Signal(32)
        rst = ResetSignal()

        def half(v):
            # Sign-extend an operand to the 8-bit half it occupies.
            return Cat(v, *([v[-1]] * (_HALF - len(v))))

        zero = Const(0, 1)
        m.submodules.mac = Instance(
            "SB_MAC16",
            p_MODE_8x8=1, p_A_SIGNED=1, p_B_SIGNED=1,
            p_A_REG=1, p_B_REG=1, p_C_REG=0, p_D_REG=0,
            p_TOP_8x8_MULT_REG=1, p_BOT_8x8_MULT_REG=1,
            p_PIPELINE_16x16_MULT_REG1=0, p_PIPELINE_16x16_MULT_REG2=0,
            # Outputs straight from the 8x8 product registers (F on top, G at the bottom).
            p_TOPOUTPUT_SELECT=2, p_BOTOUTPUT_SELECT=2,
            p_TOPADDSUB_LOWERINPUT=0, p_TOPADDSUB_UPPERINPUT=0, p_TOPADDSUB_CARRYSELECT=0,
            p_BOTADDSUB_LOWERINPUT=0, p_BOTADDSUB_UPPERINPUT=0, p_BOTADDSUB_CARRYSELECT=0,
            p_NEG_TRIGGER=0,
            i_CLK=ClockSignal(), i_CE=Const(1, 1),
            i_A=Cat(half(self.a0), half(self.a1)), i_B=Cat(half(self.b0), half(self.b1)),
            i_C=Const(0, 16), i_D=Const(0, 16),
            i_AHOLD=zero, i_BHOLD=zero, i_CHOLD=zero, i_DHOLD=zero,
            i_IRSTTOP=rst, i_IRSTBOT=rst, i_ORSTTOP=rst, i_ORSTBOT=rst,
            i_OLOADTOP=zero, i_OLOADBOT=zero, i_ADDSUBTOP=zero, i_ADDSUBBOT=zero,
            i_OHOLDTOP=zero, i_OHOLDBOT=zero, i_CI=zero, i_ACCUMCI=zero, i_SIGNEXTIN=zero,
            o_O=out,
        )
        width = len(self.p0)
        m.d.comb += [self.p0.eq(out[:width]), self.p1.eq(out[16:16 + width])]
        return m


class ECP5Mul(wiring.Component):
    """A signed product in one ECP5 MULT18X18D, with its input and output registers.

    ``p`` shows ``a * b`` two cycles after the operands are presented (:data:`MUL_PAIR_LATENCY`,
    the same pipeline as :class:`ICE40MulPair`).

    Parameters
    ----------
    a_bits, b_bits : int
        Signed operand widths, at most 18 each.

    Members
    -------
    a : In(signed(a_bits))
    b : In(signed(b_bits))
    p : Out(signed(a_bits + b_bits))
    ce : In(1, init=1)
        Clock enable of all three registers: Amaranth's ``EnableInserter`` does not reach into
        an instance, so a gated pipeline passes its enable here.
    """

    def __init__(self, a_bits=8, b_bits=8):
        for name, bits in (("a_bits", a_bits), ("b_bits", b_bits)):
            if not isinstance(bits, int) or not 2 <= bits <= _ECP5_WIDTH:
                raise ValueError(f"{name}={bits!r} is not supported by MULT18X18D; "
                                 f"allowed: 2..{_ECP5_WIDTH}")
        super().__init__({"a": In(signed(a_bits)), "b": In(signed(b_bits)),
                          "p": Out(signed(a_bits + b_bits)), "ce": In(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        out = Signal(36)
        zero, one = Const(0, 1), Const(1, 1)

        def ext(v):
            return Cat(v, *([v[-1]] * (_ECP5_WIDTH - len(v))))

        a, b = ext(self.a), ext(self.b)
        ports = {f"i_A{i}": a[i] for i in range(_ECP5_WIDTH)}
        ports.update({f"i_B{i}": b[i] for i in range(_ECP5_WIDTH)})
        ports.update({f"i_C{i}": zero for i in range(_ECP5_WIDTH)})
        ports.update({f"o_P{i}": out[i] for i in range(36)})
        for i in range(4):
            ports[f"i_CLK{i}"] = ClockSignal() if i == 0 else zero
            ports[f"i_CE{i}"] = self.ce if i == 0 else zero
            ports[f"i_RST{i}"] = ResetSignal() if i == 0 else zero
        m.submodules.mult = Instance(
            "MULT18X18D",
            p_REG_INPUTA_CLK="CLK0", p_REG_INPUTA_CE="CE0", p_REG_INPUTA_RST="RST0",
            p_REG_INPUTB_CLK="CLK0", p_REG_INPUTB_CE="CE0", p_REG_INPUTB_RST="RST0",
            p_REG_INPUTC_CLK="NONE", p_REG_PIPELINE_CLK="NONE",
            p_REG_OUTPUT_CLK="CLK0", p_REG_OUTPUT_CE="CE0", p_REG_OUTPUT_RST="RST0",
            p_CLK0_DIV="ENABLED", p_GSR="DISABLED", p_RESETMODE="SYNC",
            p_SOURCEB_MODE="B_SHIFT", p_MULT_BYPASS="DISABLED", p_CAS_MATCH_REG="FALSE",
            i_SIGNEDA=one, i_SIGNEDB=one, i_SOURCEA=zero, i_SOURCEB=zero,
            **ports)
        m.d.comb += self.p.eq(out[:len(self.p)])
        return m
