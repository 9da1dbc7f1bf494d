"""hypothesis strategies of bf16 work for the cocotb benches and the column's tests: the
column's accumulations (any pattern, Inf and NaN included), and whole bf16 MLPs with their
inputs for a device (finite values, as the compiler and the driver take them, chosen so that
Inf, NaN and flushed zeros arise inside the sums), as :func:`sim.bf16_runs.dense_case` data."""

import itertools

import numpy as np
from hypothesis import reject
from hypothesis import strategies as st

import hwgen
from hwgen.compiler import CompileError
from sim.bf16_runs import dense_case, from_dense_case

from .float_units import bf16_bits_strategy

__all__ = ["REGIMES", "accumulations", "column_values", "dense_cases", "regime_values"]


def _bf16(exponents):
    """bf16 patterns of either sign with an exponent field from ``exponents``."""
    return st.builds(lambda s, e, f: (s << 15) | (e << 7) | f, st.integers(0, 1), exponents,
                     st.integers(0, 127))


def _fp32(exponents):
    """fp32 patterns of either sign with an exponent field from ``exponents``."""
    return st.builds(lambda s, e, f: (s << 31) | (e << 23) | f, st.integers(0, 1), exponents,
                     st.integers(0, (1 << 23) - 1))


def _weighted(*choices):
    """A strategy that draws from each ``(weight, strategy)`` in proportion to its weight
    (``st.one_of`` gives each distinct strategy an equal share, whatever the repeats)."""
    return st.sampled_from([s for weight, s in choices for _ in range(weight)]).flatmap(
        lambda strategy: strategy)


# Column tiles: values mostly of moderate exponents (their sums round, cancel and carry), now
# and then any pattern (zeros, subnormals, Inf, NaN, huge and tiny values).
_moderate = _bf16(st.integers(120, 134))
column_values = _weighted((3, _moderate), (1, bf16_bits_strategy))


@st.composite
def accumulations(draw, rows):
    """One to three accumulations of one to three tiles of ``rows``: ``(x, w, bias)``, bf16
    patterns and an fp32 bias pattern."""
    result = []
    for _ in range(draw(st.integers(1, 3))):
        k = rows * draw(st.integers(1, 3))
        x, w = (draw(st.lists(column_values, min_size=k, max_size=k)) for _ in range(2))
        bias = draw(st.one_of(st.integers(0, 2 ** 32 - 1),
                              st.sampled_from([0, 0x80000000, 0x3F800000, 0x7F800000]),
                              _moderate.map(lambda v: v << 16)))
        result.append((x, w, bias))
    return result


# A tensor's finite bf16 values are of a regime, a mix of kinds of values by what a product
# x * w of exponent fields e1 + e2 does. "ordinary": 2**-13 to 2**13, products up to 52 bits
# apart, so the fp32 sums round and their order shows. "zero": +0.0 (the padding's value) or
# -0.0, and "subnormal": +0.0 by the zero rule. "flushing": e1 + e2 < 128 gives a product
# below fp32's normals, flushed to +0.0. "overflowing": e1 + e2 >= 382 gives a product beyond
# fp32, Inf, and of mixed signs Inf - Inf, NaN (a later layer's +0.0 weight on an Inf: Inf * 0,
# NaN too). "any": any finite exponent.
_EXPONENTS = {"ordinary": (114, 140), "flushing": (1, 100), "overflowing": (160, 254),
              "any": (1, 254)}
#: Each regime's kinds of values, and their weights.
REGIMES = {
    "ordinary": {"ordinary": 8, "zero": 1},
    "flush": {"flushing": 3, "ordinary": 2, "zero": 1, "subnormal": 1},
    "overflow": {"overflowing": 2, "ordinary": 3, "zero": 1},
    "any": {"ordinary": 3, "zero": 1, "subnormal": 1, "flushing": 1, "overflowing": 1,
            "any": 1},
}
# A tensor's regime when a network's are mixed: ordinary the most often (an overflowing
# tensor makes the later layers NaN, a flushing one leaves only the biases).
_mixed = ("ordinary", "ordinary", "flush", "overflow", "any")
# Values planted at drawn places: zeros, subnormals, the smallest normals, the largest finite
# values, 1 and -1.
_corners = st.sampled_from([0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x8080, 0x7F7F, 0xFF7F,
                            0x3F80, 0xBF80])
# Finite fp32 biases: mostly ordinary, else zeros, subnormals (+0.0), tiny and huge values
# (a huge bias absorbs the sums).
_bias = _weighted((5, _fp32(st.integers(114, 140))), (1, st.sampled_from([0, 0x80000000])),
                  (1, _fp32(st.just(0))), (1, _fp32(st.integers(1, 60))),
                  (1, _fp32(st.integers(200, 254))))
# Bounds (fp32 patterns): mostly none, else zeros, 6, -1, 0.5, the largest bf16, ordinary.
_bound = _weighted((4, st.none()), (1, st.sampled_from(
    [0, 0x80000000, 0x40C00000, 0xBF800000, 0x3F000000, 0x7F7F0000])),
    (1, _fp32(st.integers(118, 136))))


def regime_values(regime, count, seed):
    """``count`` finite bf16 patterns of ``regime`` (:data:`REGIMES`), drawn with NumPy from
    ``seed``: every value's own fraction, so that sums round (hypothesis's lists repeat and
    simplify values, and exact sums hide the order of the sums)."""
    rng = np.random.default_rng(seed)
    kinds = list(REGIMES[regime])
    weights = np.array([REGIMES[regime][k] for k in kinds], dtype=float)
    kind = rng.choice(len(kinds), size=count, p=weights / weights.sum())
    sign = rng.integers(0, 2, count) << 15
    exponent, fraction = np.zeros(count, dtype=np.int64), rng.integers(0, 128, count)
    for i, name in enumerate(kinds):
        here = kind == i
        if name in _EXPONENTS:
            exponent[here] = rng.integers(_EXPONENTS[name][0], _EXPONENTS[name][1] + 1,
                                          here.sum())
        fraction[here] *= name != "zero"
        fraction[here & (fraction == 0)] = name == "subnormal"
    return (sign | (exponent << 7) | fraction).tolist()


@st.composite
def _matrix(draw, rows, cols, mixed):
    """A ``rows x cols`` list of finite bf16 patterns: ordinary values, or if ``mixed`` of a
    drawn regime, with a few corner values planted."""
    regime = draw(st.sampled_from(_mixed)) if mixed else "ordinary"
    flat = regime_values(regime, rows * cols, draw(st.integers(0, 2 ** 32 - 1)))
    for place, value in draw(st.lists(st.tuples(st.integers(0, rows * cols - 1), _corners),
                                      max_size=3)):
        flat[place] = value
    return [flat[r * cols:(r + 1) * cols] for r in range(rows)]


@st.composite
def dense_cases(draw, config, *, max_width, max_batch):
    """A bf16 MLP of one to three dense layers of 1 to ``max_width`` outputs that ``config``
    compiles (ReLU or not, drawn bounds, the last raw, fp32 scores, or bf16) and 1 to
    ``max_batch`` input rows (at most the program's batch), as
    :func:`sim.bf16_runs.dense_case` data."""
    # Two networks in three of ordinary values only: their sums round, and in the order of
    # the contract's tiles (a raw output shows every fp32 bit).
    mixed = draw(st.sampled_from([False, False, True]))
    depth = draw(st.integers(1, 3))
    # Mostly more than one tile of rows: sums of several tiles, padded ones.
    width = _weighted((1, st.integers(1, max_width)),
                      (3, st.integers(min(config.rows + 1, max_width), max_width)))
    sizes = draw(st.lists(width, min_size=depth + 1, max_size=depth + 1))
    layers = []
    for i, (k, n) in enumerate(itertools.pairwise(sizes)):
        raw = i == depth - 1 and draw(st.sampled_from([True, True, False]))
        layers.append({"weight": draw(_matrix(k, n, mixed)),
                       "bias": draw(st.lists(_bias, min_size=n, max_size=n)),
                       "activation": "identity" if raw else draw(st.sampled_from(
                           ["identity", "relu"])),
                       "act_min": None if raw else draw(_bound),
                       "act_max": None if raw else draw(_bound), "raw": raw})
    net, _ = from_dense_case(dense_case(layers, [[0] * sizes[0]]), config.rows)
    try:
        batch = hwgen.compile(net, config).batch
    except CompileError:
        reject()
    m = draw(st.integers(1, min(max_batch, batch)))
    return dense_case(layers, draw(_matrix(m, sizes[0], mixed)))
