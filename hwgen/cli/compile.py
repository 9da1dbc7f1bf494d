"""``hwgen compile``: a model compiled into a program for a design, from the command line.

.. code-block:: sh

    hwgen compile model.onnx --calibration x.npy --build build/icebreaker/NAME --out model.npz
    hwgen compile mlp --board icebreaker --rows 2 --cols 2 --out mlp.npz --save-input xq.npy
    hwgen compile cnn --dtype bf16 --out cnn_bf16.npz

The design comes from a build folder (``--build DIR``: its ``report.json``), a board's preset
(``--board``, ``--preset``), a ``--config`` file or the design options, as ``hwgen build``
takes them. A float model is quantized with the design's widths, or on a ``--dtype bf16``
design rounded to bf16 (:func:`hwgen.compile_for`); ``--save-input`` writes the samples the
program takes (integers, or bf16 values as float32) for ``hwgen infer --input``.
"""

import dataclasses
import json
import sys

from hwgen.config import DTYPES, AcceleratorConfig

from .options import (
    UsageError,
    add_config_options,
    config_from_args,
    input_dir,
    input_file,
    output_file,
    say,
)

__all__ = ["register"]

_DESIGN_FIELDS = [f.name for f in dataclasses.fields(AcceleratorConfig)]


def _given_options(args):
    return ["--" + name.replace("_", "-") for name in _DESIGN_FIELDS
            if getattr(args, name) is not None]


def _from_build(args):
    """Return ``(config, board)`` of the build folder ``--build``."""
    from hwgen.boards import BOARDS

    given = _given_options(args) + [f"--{o}" for o in ("board", "preset", "config")
                                    if getattr(args, o) is not None]
    if given:
        raise UsageError(f"--build takes the design from DIR/report.json; leave out "
                         f"{', '.join(given)}")
    report_path = input_dir(args.build, "--build") / "report.json"
    input_file(report_path, "--build")
    try:
        report = json.loads(report_path.read_text())
        config = AcceleratorConfig.from_dict(report["config"])
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--build {args.build}: {report_path.name} is not a report of "
                         f"`hwgen build` ({exc})") from None
    return config, BOARDS.get(report.get("board"))


def design(args):
    """Return ``(config, board or None)``: the design ``args`` name (see the module)."""
    from hwgen.boards import BOARDS, board_config

    if args.build is not None:
        return _from_build(args)
    if args.config is not None:
        input_file(args.config, "--config")
    if args.board is not None:
        board = BOARDS[args.board]
        try:
            return board_config(board, args), board
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.preset is not None:
        raise UsageError(f"--preset {args.preset}: a board's named design; give --board too")
    defaults = AcceleratorConfig()
    for name in _DESIGN_FIELDS:
        if getattr(args, name) is None:
            setattr(args, name, getattr(defaults, name))
    return config_from_args(args, dtypes=DTYPES), None


def _input_shape(model):
    from hwgen.nn import CNN

    return model.shapes[0][0] if isinstance(model, CNN) else (model.in_features,)


def _network(source, config, calibration, output):
    """Return ``(network, program)`` of ``source`` for ``config``."""
    import hwgen
    from hwgen.compiler import CompileError, Program, design_widths
    from hwgen.dse.model import IntegerModel, ModelError, network_from_program
    from hwgen.memmap import PassKind
    from hwgen.nn import QuantizedNetwork

    model = source.model
    if isinstance(model, Program):
        if calibration is not None:
            raise UsageError("--calibration: the MODEL is a compiled program, already "
                             "quantized; calibration applies to a float model")
        if model.config_hash == config.hash:
            return None, model
        if "bf16" in (model.config.dtype, config.dtype):
            raise UsageError(f"MODEL {source.what}: compiled for {model.config.name}; a "
                             f"program is recompiled for another int8 design only: compile "
                             "the model itself (its .onnx file) for this design")
        if any(d["kind"] != PassKind.MATRIX.value or d["spatial"] for d in model.descriptors):
            raise UsageError(f"MODEL {source.what}: compiled for {model.config.name}; a "
                             "program of other than dense layers cannot be recompiled for "
                             "another design: compile the model itself (its .onnx file)")
        # Its integer network, declared with the design's accumulator and multiplier widths
        # (the values are what they are: the compiler proves that they fit).
        widths = design_widths(config)
        try:
            model = IntegerModel(network_from_program(model), label=source.what,
                                 digest="").network(**widths)
        except ModelError as exc:
            raise UsageError(f"MODEL {exc}; a program's integers keep the widths they were "
                             "quantized to: compile the float model (its .onnx file) for "
                             "this design") from None
    elif config.dtype == "bf16":
        calibration = None   # a float model is rounded to bf16: nothing to calibrate
    elif not isinstance(model, QuantizedNetwork) and calibration is None:
        shape = ", ".join(map(str, _input_shape(model)))
        raise UsageError(f"MODEL {source.what} is a float model: quantizing it needs "
                         f"calibration inputs; allowed: --calibration X.npy, float samples of "
                         f"shape (M, {shape}) (NHWC for images)")
    try:
        return hwgen.compile_for(model, config, calibration, output=output)
    except CompileError as exc:
        raise UsageError(str(exc) + _as_options(str(exc))
                         + (f"; {exc.parts}" if exc.parts else "")) from None
    except ValueError as exc:
        raise UsageError(f"MODEL {source.what}: {exc}") from None


def _as_options(message):
    """Return ``" (options: --weight-depth 608)"`` for the design a refusal suggests
    (:mod:`hwgen.compiler.suggest`: ``this design with weight_depth=608, ...``), else ``""``."""
    import re

    found = re.search(r"this design with (.*?)(?:, which|, or the preset|$)", message)
    if not found:
        return ""
    pairs = re.findall(r"(\w+)=(\w+)", found.group(1))
    flags = {"True": "1", "False": "0"}
    return " (options: " + " ".join(f"--{k.replace('_', '-')} {flags.get(v, v)}"
                                    for k, v in pairs) + ")"


def _summary(network, program, board, what):
    from hwgen.boards.fit import implementation_for
    from hwgen.cycles import program_cycles
    from hwgen.protocol import Features
    from hwgen.throughput import wire_bytes_per_run

    config = program.config
    full = program.batch
    implementation = implementation_for(board, config) if board is not None else None
    cycles = program_cycles(program, full, implementation) / full
    utilization = program.macs_per_row / (config.rows * config.cols * cycles)
    # A board without LOAD/FETCH (the iCEBreaker) moves whole words: count its wire as built.
    packed = implementation is None or bool(implementation.features & Features.PACKED)
    wire = wire_bytes_per_run(program, full, packed=packed) / full
    layers = len(network.nodes) if network is not None else len(program.layers)
    return (f"compiled {what} for {config.name} (config hash {config.hash})\n"
            f"{program.summary()}\n"
            f"layers {layers}, device passes {len(program.descriptors)}, batch {full} per run\n"
            f"cycles per inference {cycles:,.1f} at full batches "
            f"({cycles / config.clock_hz * 1e6:,.2f} us at {config.clock_hz / 1e6:g} MHz)\n"
            f"array utilization {utilization:.1%}\n"
            f"wire bytes per inference {wire:,.1f} (runs of {full}, "
            f"{'packed' if packed else 'whole words: the board has no LOAD/FETCH'})")


def _samples(args, source, network):
    """Return the samples ``--save-input`` writes: ``--input``'s (or a named model's own)
    quantized to the program's integers."""
    from .models import load_array

    if args.input is not None:
        x = load_array(args.input, "--input")
    elif source.samples is not None:
        x = source.samples
    else:
        raise UsageError("--save-input: give --input X.npy, the float samples to quantize "
                         "(a named model brings its own)")
    if getattr(network, "dtype", None) == "bf16":
        try:
            # bf16 values in float32: np.save keeps no ml_dtypes type, and the host takes both.
            return network.quantize_input(x).astype("float32")
        except ValueError as exc:
            raise UsageError(f"--input: {exc}") from None
    if network is None or network.input_scale is None:
        raise UsageError("--save-input: the MODEL has no input scale (a compiled program); "
                         "quantize the samples with the model they were calibrated for")
    try:
        xq = network.quantize_input(x)
    except ValueError as exc:
        raise UsageError(f"--input: {exc}") from None
    return xq


def _run(args):
    import numpy as np

    from .models import load_array, load_source

    output_file(args.out, "--out")
    if args.save_input is not None:
        output_file(args.save_input, "--save-input")
    elif args.input is not None:
        raise UsageError("--input: the samples are quantized for --save-input; give it too")
    config, board = design(args)
    if config.dtype == "bf16" and args.calibration is not None:
        raise UsageError("--calibration with --dtype bf16: a float model is rounded to bf16, "
                         "nothing is calibrated; leave out --calibration")
    source = load_source(args.model)
    calibration = (load_array(args.calibration, "--calibration")
                   if args.calibration is not None else source.calibration)
    say(f"hwgen compile: {source.what} for {config.name} ...")
    network, program = _network(source, config, calibration, args.last)
    # Every refusal before anything is written.
    samples = _samples(args, source, network) if args.save_input is not None else None
    program.save(args.out)
    print(_summary(network, program, board, source.what))
    print(f"wrote {args.out}")
    if samples is not None:
        np.save(args.save_input, samples)
        print(f"wrote {args.save_input}: {' x '.join(map(str, samples.shape))} "
              f"{samples.dtype}")
    sys.stdout.flush()
    return 0


def register(sub):
    """Add ``hwgen compile``."""
    from hwgen.boards import BOARDS
    from hwgen.boards.catalog import PRESET_NAMES

    from .models import SAMPLES

    p = sub.add_parser(
        "compile", help="compile a model into a program for a design (a build, a board)",
        description="Quantize MODEL with the design's widths (with --dtype bf16: round it "
                    "to bf16, no calibration) and compile it into a program "
                    "file for `hwgen infer --program`. The design: --build DIR (the folder of "
                    "`hwgen build`), --board with its preset (design options override it), "
                    "--config FILE, or the design options alone. MODEL: an ONNX file (with "
                    "--calibration), a saved program (.npz), a pickled hwgen.nn model (.pkl), "
                    "or a model by name: mlp, cnn (the demo's, trained on the digits) or the "
                    "zoo's (ad, kws, vww, resnet8, lenet5, tutorial_cnn; torch).")
    p.add_argument("model", metavar="MODEL",
                   help="FILE.onnx, FILE.npz, FILE.pkl, or a model's name (mlp, cnn, kws, ...)")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="where to write the program (.npz)")
    p.add_argument("--build", metavar="DIR",
                   help="the design of a build: DIR/report.json of `hwgen build --out DIR`")
    p.add_argument("--board", choices=sorted(BOARDS),
                   help="the board's preset design (design options given override it)")
    p.add_argument("--preset", choices=PRESET_NAMES,
                   help="a named design of --board instead of its preset")
    add_config_options(p, dtypes=DTYPES)
    # A design option that is not given takes the board's preset, or the default.
    p.set_defaults(**dict.fromkeys(_DESIGN_FIELDS))
    p.add_argument("--calibration", metavar="X.npy",
                   help="float inputs that set the activation scales: (M, features), or NHWC "
                        "images (M, H, W, C); needed for a float model file (a named model "
                        "brings its own)")
    p.add_argument("--last", choices=("raw", "requant"), default="raw",
                   help="what the last layer returns: raw accumulators, as logits (default), "
                        "or saturated activations")
    p.add_argument("--input", metavar="X.npy",
                   help="float samples to quantize for --save-input (default: a named model's "
                        f"own, {SAMPLES} of them)")
    p.add_argument("--save-input", metavar="XQ.npy",
                   help="write the samples quantized to the program's integers, for `hwgen "
                        "infer --input`")
    p.set_defaults(func=_run)
