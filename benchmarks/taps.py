"""First convolutions with their taps packed (issue 33 item 4): utilization before and after.

Run: python benchmarks/taps.py [--designs ulx3s-85f,...] [--models kws,demo-cnn,...]
                               [--batch N] [--quick] [--record [FILE]]

For each design (a board's preset or a named one of ``hwgen.boards.catalog.NAMED_PRESETS``;
``8x8-kws`` is the 85F's small 8x8 preset, ``ulx3s-85f-small``, with WEIGHT and PROGRAM large
enough for the KWS DS-CNN)
and model (the zoo's, ``hwgen.models``, imported with ``from_torch``; ``demo-cnn``, the
demo's digits CNN), quantized at the design's widths and compiled at the batch twice, pixel
by pixel (``hwgen.compile(..., taps=False)``) and with the first convolution's taps packed
(the default), it prints the first convolution's reduction tiles, cycles and utilization
(useful MACs / (rows x cols x cycles), the cycle model with the design's board
implementation), the whole inference's cycles and utilization, and the input's ACT words
per sample. A model that does not fit a design gets the compiler's reason. ``--quick`` (the
tests' smoke run) is the demo CNN on the 85F's preset; ``--record`` writes the figures into the
record (:mod:`hwgen.figures`).
"""

import argparse
import dataclasses
import sys

import hwgen
from hwgen.boards import named_design
from hwgen.boards.catalog import NAMED_PRESETS
from hwgen.boards.fit import implementation_for
from hwgen.compiler import CompileError
from hwgen.cycles import layer_cycles, program_cycles
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from hwgen.models import MODELS
from hwgen.nn import digits_cnn, from_torch, load_digits_images, quantize
from hwgen.passes import lookup

DEFAULT_DESIGNS = ("ulx3s-85f", "8x8-kws", *NAMED_PRESETS)
DEFAULT_MODELS = ("kws", "demo-cnn", "vww", "resnet8", "lenet5", "tutorial_cnn")


def design(name):
    """Return ``(board, config)`` of design ``name``."""
    if name == "8x8-kws":
        board, config = named_design("ulx3s-85f-small")
        return board, dataclasses.replace(config, weight_depth=8192, prog_depth=64)
    return named_design(name)


def model(name, config):
    """Return model ``name`` quantized at ``config``'s widths."""
    widths = {"in_bits": config.in_bits, "w_bits": config.w_bits,
              "acc_bits": config.acc_bits, "mult_bits": config.mult_bits}
    if name == "demo-cnn":
        return quantize(digits_cnn(), load_digits_images()[0][:64], **widths)
    zoo = MODELS[name]
    float_model = from_torch(zoo.model(), input_shape=zoo.input_shape)
    return quantize(float_model, zoo.calibration(64), **widths)


def taps_figures(program, config, board, m):
    """Return the first pass's ``(k_tiles, cycles, utilization)`` and the program's
    ``(cycles, utilization)`` at ``m`` samples."""
    spec, d = program.layers[0], program.descriptors[0]
    useful, _ = lookup(spec.kind).macs(spec, config)
    array = config.rows * config.cols
    implementation = implementation_for(board, config)
    first = layer_cycles(config, d, m, implementation=implementation)
    total = program_cycles(program, m, implementation)
    return (spec.k_tiles, first, useful * m / (array * first), total,
            program.macs_per_row * m / (array * total))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", default=",".join(DEFAULT_DESIGNS))
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--quick", action="store_true",
                        help="the demo CNN on ulx3s-85f (a smoke run)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    if args.quick:
        args.designs, args.models = "ulx3s-85f", "demo-cnn"
    m = args.batch
    figures = {}
    print(f"{'design':<18} {'model':<13} {'k_tiles':>9} {'first conv cycles':>19} "
          f"{'first conv util.':>17} {'cycles':>19} {'util.':>15} {'input words':>12}")
    for design_name in args.designs.split(","):
        board, config = design(design_name)
        for name in args.models.split(","):
            net = model(name, config)
            try:
                before = hwgen.compile(net, config, batch=m, taps=False)
                after = hwgen.compile(net, config, batch=m)
            except CompileError as error:
                print(f"{design_name:<18} {name:<13} {str(error).splitlines()[0][:90]}")
                continue
            b, a = taps_figures(before, config, board, m), taps_figures(after, config, board, m)
            for when, (k_tiles, first, first_util, cycles, util) in (("pixels", b), ("taps", a)):
                figures.update({f"{name}_{design_name}_{when}_{k}": v for k, v in {
                    "first_conv_k_tiles": k_tiles, "first_conv_cycles": first,
                    "first_conv_utilization_pct": 100 * first_util, "cycles": cycles,
                    "utilization_pct": 100 * util}.items()})
            print(f"{design_name:<18} {name:<13} {b[0]:>3} -> {a[0]:>3} "
                  f"{b[1]:>8,} -> {a[1]:>7,} {b[2]:>7.1%} -> {a[2]:>6.1%} "
                  f"{b[3]:>8,} -> {a[3]:>7,} {b[4]:>6.1%} -> {a[4]:>5.1%} "
                  f"{before.input.words(1):>5} -> {after.input.words(1):>4}")
    record_benchmark(__file__, args, argv, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
