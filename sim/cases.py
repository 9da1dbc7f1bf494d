"""Random networks of a design's own arithmetic for the benches that run either dtype: an
int8 :func:`~sim.netgen.fitting_network`, or on a ``dtype="bf16"`` design a bf16 MLP
(:func:`~sim.bf16_runs.bf16_mlp`), with an input batch and the check of an output against
the reference."""

import numpy as np

import hwgen
from sim.bf16_runs import bf16_mlp, bf16_rows, differing_bits
from sim.netgen import fitting_network, random_input

__all__ = ["fitting_case", "output_mismatch"]


def fitting_case(rng, config, index, *, max_m, runs=1):
    """Return ``(net, program, x)``: a random network that fits ``config``, its program and
    1 to ``max_m`` input rows, at most ``runs`` of the program's batches. A bf16 network
    returns fp32 scores, or bf16 values for an odd ``index``."""
    if config.dtype != "bf16":
        net, prog = fitting_network(rng, config)
        m = int(rng.integers(1, min(max_m, runs * prog.batch) + 1))
        return net, prog, random_input(rng, config, m, net.layers[0].in_features)
    sizes = [int(v) for v in rng.integers(2, 3 * config.rows + 1, size=3)]
    seed = int(rng.integers(1 << 16))
    net = bf16_mlp(sizes, seed, rows=config.rows, output=("raw", "bf16")[index % 2])
    prog = hwgen.compile(net, config)
    m = int(rng.integers(1, min(max_m, runs * prog.batch) + 1))
    return net, prog, bf16_rows(net, m, seed)


def output_mismatch(got, want):
    """Return None if ``got`` equals the reference's ``want`` (bit for bit for floats), else a
    message saying how they differ."""
    if np.asarray(want).dtype.kind in "iu":
        return None if np.array_equal(got, want) else "output differs from hwgen.nn"
    return differing_bits(got, want)
