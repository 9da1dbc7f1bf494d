"""The bit formats of the bf16 datapath (docs/arithmetic.md, "bfloat16") and the optional
pipeline registers of its arithmetic units.

bf16 and fp32 share the 8-bit exponent (bias 127); bf16 keeps 7 fraction bits, fp32 23. The
units read an exponent of 0 as +0.0 (the zero rule: no subnormal enters the datapath) and an
exponent of 255 as Inf (fraction 0) or NaN (any other fraction).
"""

from amaranth.hdl import Cat, Signal, Value
from amaranth.lib import data

__all__ = ["BF16", "BF16_NAN", "EXP_MAX", "FP32", "FP32_INF", "FP32_NAN", "cut",
           "float_layout", "ordered", "stage_plan"]

#: The canonical quiet NaN of fp32: every NaN the units give.
FP32_NAN = 0x7FC00000
#: The canonical quiet NaN of bf16.
BF16_NAN = 0x7FC0
#: The bits of +Inf in fp32 (the sign bit is set for -Inf).
FP32_INF = 0x7F800000
#: The exponent field of Inf and NaN.
EXP_MAX = 255


def float_layout(fraction_bits):
    """Return the layout of a binary floating-point value with an 8-bit exponent: ``fraction``
    (the low bits), ``exponent`` (biased by 127), ``sign`` (the top bit)."""
    return data.StructLayout({"fraction": fraction_bits, "exponent": 8, "sign": 1})


#: A bfloat16 value (16 bits) and an IEEE binary32 value (32 bits).
BF16 = float_layout(7)
FP32 = float_layout(23)


def stage_plan(unit, latency, plans):
    """Return the set of cut points registered for ``latency``, from ``plans`` (a tuple whose
    entry ``n`` names the cut points of latency ``n``).

    Raises
    ------
    ValueError
        If ``latency`` is not an int in ``0 .. len(plans) - 1``, naming ``unit``.
    """
    if isinstance(latency, bool) or not isinstance(latency, int) \
            or not 0 <= latency < len(plans):
        raise ValueError(f"{unit}: latency={latency!r}; allowed: an int in "
                         f"0..{len(plans) - 1} (the registers of the pipeline)")
    return frozenset(plans[latency])


def cut(m, values, registered, name):
    """Return ``values`` (a dict of names to values) through a register each when
    ``registered`` (a pipeline cut), else unchanged."""
    if not registered:
        return dict(values)
    out = {}
    for key, value in values.items():
        shape = value.shape() if isinstance(value, Value | data.View) \
            else Value.cast(value).shape()
        reg = Signal(shape, name=f"{name}_{key}")
        m.d.sync += reg.eq(value)
        out[key] = reg
    return out


def ordered(bits):
    """Return a float's bit pattern (sign on top) as an unsigned integer in the order of the
    values: the magnitude's bits inverted for a negative value, the sign bit inverted.

    Only -0.0 and +0.0 compare unequal, and the zero rule leaves no -0.0; NaNs must be decided
    apart.
    """
    sign = bits[-1]
    return Cat(bits[:-1] ^ sign.replicate(len(bits) - 1), ~sign)
