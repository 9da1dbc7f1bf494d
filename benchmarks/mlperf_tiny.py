"""MLPerf Tiny's models on the device: MACs, cycles, utilization by layer kind, latency, bytes.

Run: python benchmarks/mlperf_tiny.py [--models ad,kws,...] [--designs ulx3s-85f,...]
                                      [--samples N] [--no-board] [--quick] [--record [FILE]]

Each model of the zoo (:mod:`hwgen.models`: seeded weights, BatchNorm statistics of its
calibration data) is imported with ``hwgen.nn.from_torch``, quantized on its calibration data
at each design's widths and compiled for batch 1 (MLPerf Tiny is single-stream: one inference
at a time). For every design (a board's preset, or a named one of
``hwgen.boards.catalog.NAMED_PRESETS``) it prints

- MACs per inference: the model's (convolutions and linear layers) and the device's useful
  ones (average pooling runs as a depthwise convolution of ones, so it adds its window's);
- device cycles per inference: the cycle model's (``hwgen.cycles.program_cycles``) and, unless
  ``--no-board``, the simulated board's counters over ``--samples`` single inferences (each
  checked bit-exact against ``QuantizedNetwork.forward``, and the counters against the model);
  with ``--no-board`` the same single inferences run on the program interpreter in this
  process (``sim.inprocess.InProcessDevice``), checked bit-exact the same way; the board's
  cycles (its requantization pipeline adds a few per layer) give the latency;
- utilization, useful MACs / (rows x cols x cycles), of the whole inference and by layer kind:
  the first convolution, depthwise, pointwise, other convolutions, dense; the cycles the
  pools take, and the residual additions' cycles and share of the inference's (ResNet-8);
- latency per inference at the design's clock and at the clock its preset's build reached
  (docs/performance.md), batch 1;
- WEIGHT bytes (the tiles as stored) against the model's int8 weights, ACT bytes at batch 1,
  and wire bytes per inference at batch 1 (``hwgen.throughput.wire_bytes_per_run``) with
  their time on the default UART.

A model that does not import, or does not fit a design, gets its row with the reason (the
importer's or the compiler's error) instead of figures. ``--quick`` (the tests' smoke run) is
LeNet-5 and AD (which it refuses) on the ResNet-8 design, one sample, on the program
interpreter; ``--record`` writes the figures into the record (:mod:`hwgen.figures`). Then the
latency of ResNet-8, KWS and VWW beside the published FPGA results for the same models
(:data:`PEERS`), and last each design's figures against :data:`TARGETS` (met, or missed by
how much).
"""

import argparse
import shlex
import sys
import textwrap

import numpy as np

import hwgen
from hwgen.boards import BOARDS, named_design
from hwgen.boards.catalog import NAMED_PRESETS
from hwgen.boards.fit import implementation_for
from hwgen.compiler.compile import activation_plan
from hwgen.cycles import layer_cycles, program_cycles
from hwgen.figures import add_record_option, benchmark_record, reached_hz, record_benchmark
from hwgen.memmap import Region, regions
from hwgen.models import MODELS
from hwgen.nn import Add, Conv2D, Dense, from_torch, quantize
from hwgen.passes import lookup
from hwgen.protocol import DEFAULT_BAUD
from hwgen.throughput import BITS_PER_BYTE, wire_bytes_per_run

#: Designs measured by default: the 85F's preset, its named designs, the iCEBreaker's.
DEFAULT_DESIGNS = ("ulx3s-85f", *NAMED_PRESETS, "icebreaker")
#: Published FPGA results for MLPerf Tiny's tasks (single-stream latency, ms) by zoo model:
#: ``(who, model, board, latency_ms, source)``; docs/performance.md has the details.
PEERS = {
    "resnet8": (
        ("hls4ml", "its own ResNet (RN08)", "Pynq-Z2 (XC7Z020), Vivado", 1e3 / 130.8,
         "MLPerf Tiny v1.0, open division"),
        ("fpgaConvNet", "ResNet-8 (reference int8)", "ZedBoard (XC7Z020), Vivado",
         1e3 / 2431.6, "MLPerf Tiny v1.1, closed division"),
        ("fpgaConvNet", "ResNet-8 (reference int8)", "ZC706 (XC7Z045), Vivado", 1e3 / 6790.2,
         "MLPerf Tiny v1.1, closed division"),
    ),
    "kws": (
        ("fpgaConvNet", "DS-CNN (reference int8)", "ZedBoard (XC7Z020), Vivado", 0.324,
         "MLPerf Tiny v1.1, closed division"),
    ),
    "vww": (
        ("fpgaConvNet", "MobileNetV1 0.25 (reference)", "ZedBoard (XC7Z020), Vivado", 9.49,
         "MLPerf Tiny v1.1, closed division"),
        ("fpgaConvNet", "MobileNetV1 0.25 (reference)", "ZC706 (XC7Z045), Vivado", 0.720,
         "MLPerf Tiny v1.1, closed division"),
    ),
}
#: The task and the name of each model :data:`PEERS` has figures for.
TASKS = {"resnet8": ("image classification", "ResNet-8 (reference)"),
         "kws": ("keyword spotting", "DS-CNN (reference)"),
         "vww": ("visual wake words", "MobileNetV1 0.25 (reference)")}
#: Fmax of each preset's newest build, from the record of figures (docs/figures.json, written
#: by ``hwgen build --record``).
REACHED_HZ = reached_hz()
#: Layer kinds of the utilization columns, in order ("dw s1": the depthwise layers of
#: stride 1, also counted in "depthwise").
KINDS = ("first conv", "depthwise", "dw s1", "pointwise", "conv", "dense")
#: The targets the default design is measured against: ``(model, figure, "<=" or ">=",
#: target, what)``; the figures are :func:`target_figures`'.
TARGETS = (
    ("kws", "latency_ms", "<=", 0.32, "KWS DS-CNN latency (ms)"),
    ("vww", "latency_ms", "<=", 1.0, "VWW MobileNetV1 0.25 latency (ms)"),
    ("resnet8", "latency_ms", "<=", 1.5, "ResNet-8 latency (ms)"),
    ("resnet8", "macs_per_cycle", ">=", 115, "ResNet-8 useful MACs per cycle"),
    ("ad", "latency_ms", "<=", 0.3, "AD autoencoder latency (ms)"),
    ("vww", "dw_s1_util_pct", ">=", 60, "VWW stride-1 depthwise, % of the multipliers"),
)


def design(name):
    """Return ``(board, config)`` of a board's preset or a named preset, with any
    ``+FIELD=N`` after the name over it (``ulx3s-85f-vww+depthwise=1``).

    Raises
    ------
    ValueError
        If a ``+FIELD=N`` is not an integer field of a valid configuration.
    """
    base, *changes = name.split("+")
    fields = {}
    for change in changes:
        field, _, value = change.partition("=")
        if not value.lstrip("-").isdigit():
            raise ValueError(f"{change!r} in design {name!r}: allowed +FIELD=N, e.g. "
                             "+depthwise=1")
        fields[field] = int(value)
    return named_design(base, **fields)


def layer_kind(network, index):
    """Return the kind of network layer ``index`` for the utilization columns, ``"add"`` or
    ``"pool"``."""
    layer = network.layers[index]
    if isinstance(layer, Add):
        return "add"
    if isinstance(layer, Dense):
        return "dense"
    if not isinstance(layer, Conv2D):
        return "pool"
    first = next(i for i, other in enumerate(network.layers) if isinstance(other, Conv2D))
    if index == first:
        return "first conv"
    if getattr(layer, "groups", 1) > 1:
        return "depthwise" if layer.weight.shape[2] == 1 else "conv"
    return "pointwise" if tuple(layer.weight.shape[:2]) == (1, 1) else "conv"


def import_model(name, config):
    """Return the zoo model ``name`` imported and quantized at ``config``'s widths."""
    zoo = MODELS[name]
    float_model = from_torch(zoo.model(), input_shape=zoo.input_shape)
    return quantize(float_model, zoo.calibration(64), in_bits=config.in_bits,
                    w_bits=config.w_bits, acc_bits=config.acc_bits, mult_bits=config.mult_bits)


def act_bytes(net, config):
    """Return the bytes of ACT a batch of one takes (every area the tensors' lifetimes need,
    laid out as the compiler lays them)."""
    return activation_plan(net, config, 1).act_words * config.act_lanes * config.in_bits // 8


def figures(name, board, config):
    """Return the figures of model ``name`` on ``config`` (a dict), without the board run."""
    net = import_model(name, config)
    program = hwgen.compile(net, config, batch=1)
    per_kind = {kind: [0, 0] for kind in (*KINDS, "pool", "add")}
    implementation = implementation_for(board, config)
    for spec, d in zip(program.layers, program.descriptors, strict=True):
        useful, _ = lookup(spec.kind).macs(spec, config)
        cycles = layer_cycles(config, d, 1, implementation=implementation)
        kind = layer_kind(net, spec.source)
        kinds = [kind]
        if kind == "depthwise" and net.layers[spec.source].strides == (1, 1):
            kinds.append("dw s1")
        for k in kinds:
            per_kind[k][0] += useful
            per_kind[k][1] += cycles
    geo = regions(config)
    w_words = len(program.images[Region.WEIGHT][1])
    return {
        "net": net, "program": program,
        "macs": MODELS[name].macs, "device_macs": program.macs_per_row,
        "model_cycles": program_cycles(program, 1),
        "board_cycles": program_cycles(program, 1, implementation),
        "per_kind": per_kind,
        "weight_bytes": w_words * geo[Region.WEIGHT].word_bytes,
        "model_weights": sum(int(np.size(layer.weight)) for layer in net.layers
                             if isinstance(layer, Dense | Conv2D)),
        "act_bytes": act_bytes(net, config),
        "wire_bytes": wire_bytes_per_run(program, 1),
    }


def board_run(name, config, net, program, samples, *, on_board=True):
    """Run ``samples`` single inferences on a simulated board (or, with ``on_board=False``,
    on the program interpreter in this process); return its cycles per inference (all equal
    to the model's, or an AssertionError says which differ).

    Raises
    ------
    AssertionError
        If an output differs from ``net.forward`` or a cycle count from the model's.
    """
    import contextlib

    from host import Accelerator
    from sim.inprocess import InProcessDevice

    x = net.quantize_input(MODELS[name].calibration(samples, seed=99))
    cycles = []
    with contextlib.ExitStack() as stack:
        if on_board:
            from sim.board import SimulatedBoard

            device = stack.enter_context(SimulatedBoard(config)).url
        else:
            device = InProcessDevice(config)
        acc = stack.enter_context(Accelerator(device, config=config))
        acc.load(program)
        for row in x:
            y = acc.infer(row[None])
            if not np.array_equal(y, net.forward(row[None])):
                raise AssertionError(f"{name}: the device's output differs from hwgen.nn")
            cycles.append(acc.counters().cycles)
    model = program_cycles(program, 1)
    if any(c != model for c in cycles):
        raise AssertionError(f"{name}: the device counted {cycles} cycles, the model {model}")
    return cycles[0]


def row(name, design_name, *, samples, on_board):
    """Return the printable row of ``name`` on design ``design_name``: its figures, or the
    reason it has none."""
    board, config = design(design_name)
    try:
        f = figures(name, board, config)
    except ValueError as error:  # the importer's UnsupportedModelError, a CompileError
        lines = str(error).splitlines()
        more = f"\n  ... ({len(lines) - 4} more)" if len(lines) > 4 else ""
        return {"name": name, "design": design_name,
                "reason": f"{type(error).__name__}: " + "\n".join(lines[:4]) + more}
    f.update(name=name, design=design_name, config=config, board=board)
    f["sim_cycles"] = board_run(name, config, f["net"], f["program"], samples,
                                on_board=on_board)
    return f


def _util(macs, cycles, config, kind=None):
    return f"{macs / (kind_multipliers(config, kind) * cycles):.1%}" if cycles else "-"


def kind_multipliers(config, kind=None):
    """Return the array's multipliers that layers of ``kind`` have: a depthwise layer's
    (``depthwise``, ``dw s1``) count the depthwise unit's extra rows."""
    rows = config.array_rows if kind in ("depthwise", "dw s1") else config.rows
    return rows * config.cols


def add_share(r):
    """Return the residual additions' share of row ``r``'s cycles (0 without additions)."""
    return r["per_kind"]["add"][1] / r["board_cycles"]


def print_table(rows):
    """Print the figures, then the reasons of the rows without them."""
    head = (f"{'model':<13} {'design':<26} {'MACs':>10} {'dev. MACs':>10} {'cycles':>10} "
            f"{'sim':>10} {'util.':>6} " + " ".join(f"{k:>10}" for k in KINDS)
            + f" {'pool cyc.':>9} {'add cyc.':>8} {'add %':>6} {'us @clk':>9} {'us @Fmax':>9} "
              f"{'W bytes':>9} {'int8 W':>8} {'ACT bytes':>9} {'wire B':>7} {'UART ms':>8}")
    print(head)
    for r in rows:
        if "reason" in r:
            continue
        config = r["config"]
        clock = config.clock_hz
        reached = REACHED_HZ.get(r["design"])
        kinds = " ".join(f"{_util(*r['per_kind'][k], config, k):>10}" for k in KINDS)
        sim = f"{r['sim_cycles']:,}" if r["sim_cycles"] is not None else "-"
        at_fmax = f"{r['board_cycles'] / reached * 1e6:>9.1f}" if reached else f"{'-':>9}"
        print(f"{r['name']:<13} {r['design']:<26} {r['macs']:>10,} {r['device_macs']:>10,} "
              f"{r['board_cycles']:>10,} {sim:>10} "
              f"{_util(r['device_macs'], r['board_cycles'], config):>6} {kinds} "
              f"{r['per_kind']['pool'][1]:>9,} {r['per_kind']['add'][1]:>8,} "
              f"{add_share(r):>6.1%} {r['board_cycles'] / clock * 1e6:>9.1f} "
              f"{at_fmax} {r['weight_bytes']:>9,} {r['model_weights']:>8,} "
              f"{r['act_bytes']:>9,} {r['wire_bytes']:>7,} "
              f"{r['wire_bytes'] * BITS_PER_BYTE / DEFAULT_BAUD * 1e3:>8.1f}")
    print()
    for r in rows:
        if "reason" in r:
            print(f"{r['name']} on {r['design']}: {r['reason']}")
    print("\ncycles: per inference on the board's design (hwgen.cycles with the board's "
          "implementation); sim: the simulated board's counter, or with --no-board the "
          "program interpreter's (the plain device: the model's cycles without the "
          "requantization pipeline).\nutil.: useful "
          "MACs / (rows x cols x cycles), per layer kind on that kind's layers' cycles "
          "(dw s1: the depthwise layers of stride 1; depthwise and dw s1 over array_rows x "
          "cols, the depthwise unit's extra rows too). "
          "add cyc., add %: the residual additions' cycles and share of the cycles. "
          "us @clk: latency at the design's clock; us @Fmax: at the Fmax its preset's build "
          "reached (docs/performance.md).\nW bytes: WEIGHT as stored (tiles padded); int8 W: "
          "the model's weights; ACT bytes: the activation areas at batch 1; wire B: both ways "
          f"per inference at batch 1; UART ms: their time on the {DEFAULT_BAUD:,} baud UART.")


def print_peers(rows):
    """Print the latency of each model of :data:`PEERS` on each design that ran it beside
    the published results."""
    for name, peers in PEERS.items():
        ours = [r for r in rows if r["name"] == name and "reason" not in r]
        if not ours:
            continue
        task, model = TASKS[name]
        print(f"\nMLPerf Tiny {task}, batch 1 (single stream):")
        print(f"{'who':<12} {'model':<29} {'board':<40} {'ms':>7} {'inf/s':>8} "
              f"{'ms at 100 %':>11}  source")
        for r in ours:
            config = r["config"]
            clock = config.clock_hz
            ms = r["board_cycles"] / clock * 1e3
            board = f"{r['board'].name} ({r['board'].device}), {clock / 1e6:g} MHz, YoWASP"
            adds = f" (adds {add_share(r):.1%} of the cycles)" if add_share(r) else ""
            # The design's bound: every multiplier busy in every cycle.
            bound = r["device_macs"] / (config.rows * config.cols) / clock * 1e3
            print(f"{'hwgen':<12} {model:<29} {board:<40} {ms:>7.3f} {1e3 / ms:>8,.1f} "
                  f"{bound:>11.3f}  this run, --designs {r['design']}{adds}")
        for who, peer_model, board, ms, source in peers:
            print(f"{who:<12} {peer_model:<29} {board:<40} {ms:>7.3f} {1e3 / ms:>8,.1f} "
                  f"{'':>11}  {source}")
    print("\nms at 100 %: the latency if every multiplier of the array were busy in every "
          "cycle (the device's MACs / (rows x cols), at the design's clock): no schedule on "
          "that design and clock is faster.")


def target_figures(r):
    """Return the figures of row ``r`` that :data:`TARGETS` names."""
    config, cycles = r["config"], r["board_cycles"]
    macs, dw_cycles = r["per_kind"]["dw s1"]
    return {"latency_ms": cycles / config.clock_hz * 1e3,
            "macs_per_cycle": r["device_macs"] / cycles,
            "dw_s1_util_pct": (100 * macs / (kind_multipliers(config, "dw s1") * dw_cycles)
                               if dw_cycles else None)}


def print_targets(rows, design_name):
    """Print each of :data:`TARGETS` on design ``design_name``: the measured figure, met or
    missed and by how much, or why there is no figure."""
    print(f"\nTargets on {design_name} (batch 1, the board's cycles at its clock):")
    print(f"{'target':<46} {'goal':>9} {'measured':>10}  verdict")
    for name, figure, sense, goal, what in TARGETS:
        r = next((r for r in rows if r["name"] == name and r["design"] == design_name), None)
        if r is None:
            measured, verdict = "-", "not run (--models)"
        elif "reason" in r:
            first = textwrap.shorten(r["reason"].splitlines()[0], 80, placeholder=" ...")
            measured, verdict = "-", f"missed: the design refuses it ({first})"
        else:
            value = target_figures(r)[figure]
            if value is None:
                measured, verdict = "-", "no such layers"
            else:
                met = value <= goal if sense == "<=" else value >= goal
                factor = value / goal if sense == "<=" else goal / value
                measured = f"{value:,.3g}"
                verdict = "met" if met else f"missed by {factor:.2f}x"
        print(f"{what:<46} {sense + ' ' + format(goal, 'g'):>9} {measured:>10}  {verdict}")
    reached = REACHED_HZ.get(design_name)
    clock = design(design_name)[1].clock_hz
    print("clock: " + (f"{clock / 1e6:g} MHz, its newest build reached {reached / 1e6:.1f} MHz"
                       if reached else f"{clock / 1e6:g} MHz, no build of it in the record"))


def row_figures(rows):
    """Return the figures of the rows that have them, for the record, each named by its model
    and design (``resnet8_ulx3s-85f-resnet8_latency_ms``)."""
    figures = {}
    for r in rows:
        if "reason" in r:
            continue
        config, cycles = r["config"], r["board_cycles"]
        ms = cycles / config.clock_hz * 1e3
        figures.update({f"{r['name']}_{r['design']}_{k}": v for k, v in {
            "macs": r["macs"], "cycles": cycles, "sim_cycles": r["sim_cycles"],
            "clock_mhz": config.clock_hz / 1e6, "latency_ms": ms, "inferences_per_s": 1e3 / ms,
            "utilization_pct": 100 * r["device_macs"] / (config.rows * config.cols * cycles),
            "add_share_pct": 100 * add_share(r), "wire_bytes": r["wire_bytes"]}.items()})
        dw_util = target_figures(r)["dw_s1_util_pct"]
        if dw_util is not None:
            figures[f"{r['name']}_{r['design']}_dw_s1_utilization_pct"] = dw_util
    return figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma list of zoo models (default: all; {', '.join(MODELS)})")
    parser.add_argument("--designs", default=",".join(DEFAULT_DESIGNS),
                        help="comma list of boards or named presets, each with any "
                             "+FIELD=N over it, e.g. ulx3s-85f-vww+depthwise=1 (default: "
                             f"{', '.join(DEFAULT_DESIGNS)})")
    parser.add_argument("--samples", type=int, default=2, metavar="N",
                        help="single inferences per model on the simulated board (default 2)")
    parser.add_argument("--no-board", action="store_true",
                        help="run on the program interpreter in this process instead of the "
                             "simulated boards")
    parser.add_argument("--quick", action="store_true",
                        help="LeNet-5 and AD (which it refuses) on ulx3s-85f-resnet8, one "
                             "sample, --no-board (a smoke run)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    if args.quick:
        args.models, args.designs = "lenet5,ad", "ulx3s-85f-resnet8"
        args.samples, args.no_board = 1, True
    models, designs = args.models.split(","), args.designs.split(",")
    known = (*BOARDS, *NAMED_PRESETS)
    bad = ([m for m in models if m not in MODELS]
           + [d for d in designs if d.split("+")[0] not in known])
    for d in designs:
        try:
            if d.split("+")[0] in known:
                design(d)
        except (TypeError, ValueError) as error:
            parser.error(f"--designs {d}: {error}")
    if bad or args.samples < 1:
        parser.error(f"unknown {', '.join(bad)}; models: {', '.join(MODELS)}; designs: "
                     f"{', '.join(known)}; --samples >= 1" if bad else "--samples must be >= 1")
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv), flush=True)
    rows = []
    for design_name in designs:
        for name in models:
            rows.append(row(name, design_name, samples=args.samples,
                            on_board=not args.no_board))
            print(f"  {name} on {design_name}: "
                  + ("done" if "reason" not in rows[-1] else "no figures"), flush=True)
    print()
    print_table(rows)
    print_peers(rows)
    targeted = {name for name, *_ in TARGETS}
    for design_name in designs:
        if any(r["design"] == design_name and r["name"] in targeted for r in rows):
            print_targets(rows, design_name)
    record_benchmark(__file__, args, argv, row_figures(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
