"""Benchmark of convolutional networks on the device: array utilization and wire bytes.

Run: python benchmarks/cnn.py [--epochs E] [--calls N] [--quick] [--record [FILE]]

Two workloads run through ``host.Accelerator`` on simulated boards (``sim.board.SimulatedBoard``:
the device's Verilog under Verilator, over TCP):

(a) one 3x3 convolution, 16 -> 16 channels, 16x16 pixels, padding 1, batch 8, random int8
    weights, on the 8x8 int8 weight-stationary array (the default design with ``act_depth``
    8192, which the 16-channel image needs at batch 8);
(b) the demo's CNN (``hwgen demo --model cnn``: conv 3x3 8, pool 2, conv 3x3 16, pool 2,
    dense 10 on the 8x8 digits), trained for ``--epochs``, on the default design.

For each it prints the device's cycles per batch (from its counters) next to the cycle model's
(``hwgen.cycles.program_cycles``), the array utilization (useful MACs / (rows * cols * cycles)),
and the bytes on the wire per inference (the driver's count) against the input and output bytes
plus the protocol's framing (``hwgen.throughput.wire_bytes_per_run`` less the input and output
words). Every output is checked bit-exact against ``QuantizedNetwork.forward``.

``--quick`` (the tests' smoke run) makes (a) a 4x4 image of 8 channels, batch 2, and trains (b)
for one epoch, run on 16 test images; ``--record`` writes the figures into the record
(:mod:`hwgen.figures`).
"""

import argparse
import math
import shlex
import sys

import numpy as np

import hwgen
from host import Accelerator
from hwgen import AcceleratorConfig
from hwgen.cycles import program_cycles
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from hwgen.nn import Conv2D, QuantizedNetwork, load_digits_images, quantize, train_digits_cnn
from hwgen.protocol import MAX_PAYLOAD
from hwgen.streams import fetch_chunks, load_chunks
from hwgen.throughput import wire_bytes_per_run
from sim.board import SimulatedBoard

CONV_SHAPE = (16, 16, 16)  # H, W, C_in
CONV_BATCH = 8
QUICK_SHAPE, QUICK_BATCH = (4, 4, 8), 2


def conv_workload(rng, shape=CONV_SHAPE):
    """Return workload (a): its network (a 3x3 convolution of ``shape`` ``(H, W, C)``, as many
    channels out as in) and its config."""
    c_in, c_out = shape[2], shape[2]
    weight = rng.integers(-127, 128, size=(3, 3, c_in, c_out))
    bias = rng.integers(-2000, 2000, size=c_out)
    # mult / 2**shift about 1 / (sqrt(K) * 127): outputs spread over the int8 range.
    layer = Conv2D(weight, bias, np.full(c_out, 1 << 14), np.full(c_out, 23), padding=1)
    net = QuantizedNetwork([layer], input_shape=shape)
    # The 16-channel image needs 8,192 words at batch 8; a smaller one the default design's.
    return net, AcceleratorConfig(act_depth=8192) if shape == CONV_SHAPE else AcceleratorConfig()


def demo_workload(epochs):
    """Return workload (b): the demo's CNN, trained and quantized, its config and test images."""
    config = AcceleratorConfig()
    x_train, _, x_test, _ = load_digits_images()
    trained = train_digits_cnn(epochs=epochs, seed=0)
    net = quantize(trained, x_train, in_bits=config.in_bits, w_bits=config.w_bits,
                   acc_bits=config.acc_bits, mult_bits=config.mult_bits)
    return net, config, net.quantize_input(x_test)


def sample_bytes(net):
    """Return the bytes of one sample's input and output values, packed (no lane padding)."""
    input_shape = net.shapes[0][0]
    raw = getattr(net.layers[-1], "output", "requant") == "raw"   # pooling: requantized
    out_bits = net.acc_bits if raw else net.in_bits
    return (math.prod(input_shape) * math.ceil(net.in_bits / 8),
            math.prod(net.output_shape) * math.ceil(out_bits / 8))


def data_bytes(program, m):
    """Return the bytes of the input and of the output values of ``m`` samples on the packed
    wire (the LOADs' and the FETCHes' data, :mod:`hwgen.streams`)."""
    return (sum(c.data_bytes for c in load_chunks(program.input, m, MAX_PAYLOAD)),
            sum(c.data_bytes for c in fetch_chunks(program.output, m, MAX_PAYLOAD)))


def measure(name, net, config, batches, program):
    """Run ``batches`` through a simulated board; return the figures of the row of ``name``."""
    with SimulatedBoard(config) as board, Accelerator(board.url, config=config) as acc:
        acc.load(program)
        acc.infer(batches[0][:1])  # warm up: the driver's rate estimate
        cycles = wire = rows = model = 0
        in_bytes = out_bytes = framing = 0
        for x in batches:
            y = acc.infer(x)
            counters = acc.counters()  # of this call alone
            if not np.array_equal(y, net.forward(x)):
                raise AssertionError(f"{name}: the device's output differs from hwgen.nn")
            m = len(x)
            cycles += counters.cycles
            wire += counters.wire_bytes
            rows += m
            for start in range(0, m, program.batch):
                chunk = min(program.batch, m - start)
                model += program_cycles(program, chunk)
                i, o = data_bytes(program, chunk)
                in_bytes, out_bytes = in_bytes + i, out_bytes + o
                framing += wire_bytes_per_run(program, chunk) - i - o
    macs = program.macs_per_row * rows
    values_in, values_out = sample_bytes(net)
    return {
        "name": name, "rows": rows, "cycles": cycles, "model": model,
        "utilization": macs / (config.rows * config.cols * cycles),
        "in": in_bytes / rows, "out": out_bytes / rows, "framing": framing / rows,
        "wire": wire / rows, "values_in": values_in, "values_out": values_out,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30, metavar="E",
                        help="training epochs of the demo CNN (default: the demo's 30)")
    parser.add_argument("--calls", type=int, default=4, metavar="N",
                        help="infer calls of workload (a), one batch each (default: 4)")
    parser.add_argument("--quick", action="store_true",
                        help="small workloads, one call each (a smoke run)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.calls < 1:
        parser.error("--epochs and --calls must be at least 1")
    benchmark_record(parser, args)
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv), flush=True)

    shape, batch = (QUICK_SHAPE, QUICK_BATCH) if args.quick else (CONV_SHAPE, CONV_BATCH)
    calls, epochs = (1, 1) if args.quick else (args.calls, args.epochs)
    rng = np.random.default_rng(0)
    net, config = conv_workload(rng, shape)
    program = hwgen.compile(net, config, batch=batch)
    batches = [rng.integers(-128, 128, size=(batch, *shape)) for _ in range(calls)]
    h, w, c = shape
    results = [measure(f"(a) conv 3x3 {c}->{c}, {h}x{w}, pad 1, batch {batch}", net, config,
                       batches, program)]

    net, config, x_test = demo_workload(epochs)
    if args.quick:
        x_test = x_test[:16]
    program = hwgen.compile(net, config)
    results.append(measure(f"(b) demo CNN, {len(x_test)} test images, batch {program.batch}",
                           net, config, [x_test], program))

    print(f"\n{'workload':<48} {'cycles':>9} {'model':>9} {'util.':>6} {'in B':>6} "
          f"{'out B':>6} {'frame B':>7} {'wire B':>7} {'wire/(in+out+frame)':>19}")
    for r in results:
        expected = r["in"] + r["out"] + r["framing"]
        print(f"{r['name']:<48} {r['cycles']:>9,} {r['model']:>9,} {r['utilization']:>6.1%} "
              f"{r['in']:>6.1f} {r['out']:>6.1f} {r['framing']:>7.1f} {r['wire']:>7.1f} "
              f"{r['wire'] / expected:>19.3f}")
    print(f"\n{'workload':<48} {'values in B':>11} {'values out B':>12}")
    for r in results:
        print(f"{r['name']:<48} {r['values_in']:>11,} {r['values_out']:>12,}")
    print("\ncycles: the device's counters over every batch; model: hwgen.cycles.program_cycles "
          "of the same batches.\nutil.: useful MACs / (rows x cols x cycles). Bytes per "
          "inference: in/out the input and output words, frame the framing of one WRITE/RUN/"
          "COUNTERS/READ exchange per batch (hwgen.throughput), wire what the driver counted.\n"
          "values in/out: one sample's input and output values packed, without the lanes "
          "of the device's words that a layer's channels leave empty.")
    errors = [r["name"] for r in results if r["cycles"] != r["model"]]
    if errors:
        print(f"cnn.py: error: the cycle model is off for {', '.join(errors)}", file=sys.stderr)
        return 1
    figures = {}
    for key, r in zip(("conv", "demo_cnn"), results, strict=True):
        expected = r["in"] + r["out"] + r["framing"]
        figures.update({f"{key}_cycles": r["cycles"],
                        f"{key}_utilization_pct": 100 * r["utilization"],
                        f"{key}_wire_bytes_per_inference": r["wire"],
                        f"{key}_wire_over_expected": r["wire"] / expected})
    record_benchmark(__file__, args, argv, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
