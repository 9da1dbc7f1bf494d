"""For the compiler's tests (``tests/compiler``): the descriptor fields as documented, the
compiler's test configurations, random dense networks and their inputs, refusals."""

import itertools
import math

import numpy as np
import pytest

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, compile_network
from hwgen.nn import Dense, Flatten, QuantizedNetwork
from sim.interpreter import run_on_interpreter, signed_range


def documented_descriptor_fields(config):
    """Descriptor fields, least significant first, as documented in hwgen.memmap: each as wide
    as the largest value the compiler can put there."""
    nt = max(1, min(config.param_depth, config.weight_depth // config.rows))
    ad = max(config.act_depth, config.out_depth)
    limits = [1, 1, 1, 1, 7, -(-config.max_k // config.rows), nt, nt * config.cols,
              config.act_depth - 1, min(-(-config.max_k // config.act_lanes), config.act_depth),
              *([config.act_depth - 1] if config.residual else []),
              ad - 1, min(nt, ad), config.weight_depth - 1, config.param_depth - 1]
    names = ["leaky", "raw", "last", "spatial", "kind", "k_tiles", "n_tiles", "n", "src_base",
             "src_stride", *(["src2_base"] if config.residual else []), "dst_base",
             "dst_stride", "w_base", "p_base"]
    # Then the activation bounds, signed in_bits each.
    return [*((name, max(1, limit.bit_length()))
              for name, limit in zip(names, limits, strict=True)),
            ("act_min", config.in_bits), ("act_max", config.in_bits)]


def documented_geometry_fields(config):
    """A spatial layer's geometry fields, least significant first, as documented in
    hwgen.memmap.geometry_layout: sides and kernel as wide as ``act_depth``, the strides per axis
    and the top and left padding four bits (up to 15), channel groups as wide as ``k_tiles``,
    steps as wide as an ACT address, the channel window's step as wide as ``src_stride`` and a
    bank (``act_lanes`` of them), the weight repeat one bit; last the diagonal tiles' bit."""
    side = max(1, config.act_depth.bit_length())
    addr = max(1, (config.act_depth - 1).bit_length())
    fields = dict(documented_descriptor_fields(config))
    return [*((name, side) for name in ("h", "w", "oh", "ow", "kh", "kw")),
            ("sy", 4), ("sx", 4), ("pad_top", 4), ("pad_left", 4), ("cgs", fields["k_tiles"]),
            *((name, addr) for name in ("col_step", "row_step", "img_step", "ky_step")),
            ("cb_word", fields["src_stride"]),
            ("cb_rem", max(1, (config.act_lanes - 1).bit_length())), ("wrep", 1),
            *documented_taps_fields(config), *documented_pool_fields(config), ("wdiag", 1)]


def documented_pool_fields(config):
    """The geometry's fused pool fields of a design with ``spatial`` and ``fuse_pool``, as
    documented in hwgen.memmap.geometry_layout (last): the window side less one in three bits
    (up to 7), one conv row down as wide as an ACT address and, with taps, a bank."""
    if not (config.spatial and config.fuse_pool):
        return []
    addr = max(1, (config.act_depth - 1).bit_length())
    bank = max(1, (config.act_lanes - 1).bit_length())
    return [("pool", 3), ("down_step", addr), *([("down_rem", bank)] if config.taps else [])]


def documented_taps_fields(config):
    """The geometry's taps fields of a design with ``spatial`` and ``taps``, as documented in
    hwgen.memmap.geometry_layout: a flag, taps per kernel row as wide as ``max_k``, the tile's
    steps as wide as ``rows``, two steps as wide as an ACT address and four banks."""
    if not (config.spatial and config.taps):
        return []
    addr = max(1, (config.act_depth - 1).bit_length())
    bank = max(1, (config.act_lanes - 1).bit_length())
    return [("taps", 1), ("kwc", config.max_k.bit_length()), ("tq", config.rows.bit_length()),
            ("tr", config.rows.bit_length()), ("d_word", addr), ("tq_word", addr),
            *((name, bank) for name in ("rem0", "col_rem", "row_rem", "img_rem"))]


COMPILER_CONFIGS = {
    "1x1": AcceleratorConfig(rows=1, cols=1, act_depth=1 << 16, weight_depth=1 << 18,
                             param_depth=4096, out_depth=1 << 14, prog_depth=4),
    "2x3": AcceleratorConfig(rows=2, cols=3, in_bits=4, w_bits=6, acc_bits=24, mult_bits=8,
                             act_depth=1 << 15, weight_depth=1 << 16, param_depth=512,
                             out_depth=1 << 13),
    "3x2": AcceleratorConfig(rows=3, cols=2, act_depth=1 << 15, weight_depth=1 << 17,
                             param_depth=512, out_depth=1 << 13, acc_depth=64),
    "4x4": AcceleratorConfig(rows=4, cols=4, in_bits=16, w_bits=16, acc_bits=64, mult_bits=32,
                             act_depth=1 << 14, weight_depth=1 << 16, param_depth=256,
                             out_depth=1 << 12),
    "8x8": AcceleratorConfig(act_depth=1 << 13, weight_depth=1 << 15, out_depth=1 << 13),
    # Output-stationary, and acc_bits as small as max_k allows: headroom is tight.
    "os5x7": AcceleratorConfig(rows=5, cols=7, dataflow="os", in_bits=6, w_bits=3, acc_bits=19,
                               mult_bits=5, act_depth=1 << 13, weight_depth=1 << 15,
                               out_depth=1 << 12),
}


def random_dense_layer(rng, config, k, n, *, style, activation, output, acc_bits, mult_bits):
    """Return a Dense layer whose accumulator provably fits ``acc_bits``."""
    w_low, w_high = signed_range(config.w_bits)
    if style == "extreme":
        weight = rng.choice([w_low, w_high, 0, -1, 1], size=(k, n))
    elif style == "sparse":
        weight = rng.integers(w_low, w_high + 1, size=(k, n)) * (rng.random((k, n)) < 0.1)
    else:
        weight = rng.integers(w_low, w_high + 1, size=(k, n))
    weight = weight.astype(np.int64)
    limit = (1 << (acc_bits - 1)) - 1
    headroom = [limit - (1 << (config.in_bits - 1)) * int(np.abs(weight[:, j]).sum())
                for j in range(n)]
    assert min(headroom) >= 0  # the configs' acc_bits cover max_k worst-case products
    bias = np.zeros(n, dtype=np.int64)
    for j in range(n):
        h = headroom[j]
        small = min(h, 1 << (config.in_bits + config.w_bits))
        bias[j] = rng.choice([h, -h]) if rng.random() < 0.15 else rng.integers(-small, small + 1)
    mult_high = (1 << mult_bits) - 1
    mult = rng.integers(0, mult_high + 1, size=n).astype(np.int64)
    mult[rng.random(n) < 0.1] = mult_high
    mult[rng.random(n) < 0.05] = 0
    # Aim the shift at the typical accumulator so that outputs are not all saturated.
    typical = (1 << (config.in_bits - 1)) * (1 << (config.w_bits - 1)) * max(1, math.isqrt(k))
    max_shift = acc_bits + mult_bits - 1
    shift = np.array([min(max((typical * max(int(mu), 1)).bit_length() - config.in_bits
                               + int(rng.integers(-3, 4)), 0), max_shift) for mu in mult])
    shift[rng.random(n) < 0.05] = 0
    shift[rng.random(n) < 0.05] = max_shift
    return Dense(weight, bias, mult, shift, activation=activation, output=output)


def random_dense_network(rng, config, sizes, *, style, last_raw, acc_bits=None,
                         mult_bits=None):
    """Return a network of dense layers of ``sizes`` (``style`` as for
    :func:`random_dense_layer`), the last one raw if ``last_raw``."""
    acc_bits = acc_bits or config.acc_bits
    mult_bits = mult_bits or config.mult_bits
    layers = []
    for i, (k, n) in enumerate(itertools.pairwise(sizes)):
        last = i == len(sizes) - 2
        layers.append(random_dense_layer(
            rng, config, k, n, style=style, acc_bits=acc_bits, mult_bits=mult_bits,
            activation=str(rng.choice(["relu", "identity"])),
            output="raw" if last and last_raw else "requant"))
    return QuantizedNetwork(layers, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=acc_bits, mult_bits=mult_bits)


def random_input_rows(rng, config, m, k):
    """Return ``[m, k]`` signed ``in_bits`` inputs, about 5 % of them the lowest value."""
    low, high = signed_range(config.in_bits)
    x = rng.integers(low, high + 1, size=(m, k))
    x[rng.random((m, k)) < 0.05] = low
    return x


def check_against_reference(network, config, m, *, batch=None, seed=0, **options):
    """Compile ``network`` (with the compiler's keyword ``options``), run it on ``m`` random
    samples (rows or NHWC images) in the interpreter and check both the interpreter's and
    ``unpack_output``'s result against the reference; return the program."""
    program = compile_network(network, config, batch=batch, **options)
    m = min(m, program.batch)
    shapes = network.shapes
    x = random_input_rows(np.random.default_rng(seed), config, m, network.in_features)
    x = x.reshape(m, *shapes[0][0])
    expected = network.forward(x)
    # The last layer that computes (a Flatten after it only reshapes) and its channels.
    last = max(i for i, layer in enumerate(network.layers) if not isinstance(layer, Flatten))
    interpreted, unpacked = run_on_interpreter(program, x, seed, out_shape=shapes[-1][1],
                                               channels=shapes[last][1][-1])
    np.testing.assert_array_equal(interpreted, expected)
    np.testing.assert_array_equal(unpacked, expected)
    return program


def assert_interpreted(program, net, x):
    """Run ``program`` on ``x`` in the interpreter; check its result and ``unpack_output``'s
    against ``net.forward(x)``; return the program."""
    got, unpacked = run_on_interpreter(program, x, out_shape=net.output_shape,
                                       channels=net.output_shape[-1])
    want = net.forward(x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(unpacked, want)
    return program


def small_dense_network(config, sizes=(4, 3), *, last_raw=False, seed=0, **widths):
    """Return a random uniform dense network of layer ``sizes`` for ``config``."""
    return random_dense_network(np.random.default_rng(seed), config, list(sizes),
                                style="uniform", last_raw=last_raw, **widths)


def compile_refused(network, config, *fragments, error=CompileError, **kwargs):
    """Check that compiling ``network`` raises ``error`` with every one of ``fragments`` in its
    message; return the error."""
    with pytest.raises(error) as info:
        compile_network(network, config, **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    return info.value
