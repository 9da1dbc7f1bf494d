"""``hwgen soc``: the accelerator in a LiteX SoC whose VexRiscv CPU runs inference alone.

.. code-block:: sh

    hwgen soc --board ulx3s-85f --sim          # LiteX's Verilator simulation, console printed
    hwgen soc --board ulx3s-85f                # the ULX3S-85F bitstream, resources and Fmax

Compiles MODEL (default the demo's MLP) for the board's design at the SoC's clock, writes the
accelerator's Wishbone top (``hwgen generate --top wishbone``), the firmware (``hwgen.h``,
``hwgen_model.h``, ``main.c``) and builds the SoC around them. Needs the extra ``soc``
(``pip install 'hwgen[soc]'``) and Debian's ``gcc-riscv64-unknown-elf``, and ``--sim`` the C
headers of ``libevent-dev``, ``libjson-c-dev`` and ``zlib1g-dev``
(:mod:`hwgen.soc.requirements`); see docs/integration.md.
"""

import dataclasses

from hwgen.config import AcceleratorConfig
from hwgen.figures import add_record_option

from .options import (
    UsageError,
    add_config_options,
    number,
    output_dir,
    record_figures,
    record_file,
    say,
)

__all__ = ["register"]

_DESIGN_FIELDS = [f.name for f in dataclasses.fields(AcceleratorConfig)]


def _check_tools(sim):
    from hwgen.soc.requirements import missing_requirements

    missing = missing_requirements(sim)
    if missing:
        raise UsageError(f"{'--sim' if sim else 'the board build'} needs " + ", ".join(missing))


def _labels(name):
    """The true labels of a demo model's samples (the test split's first, as
    :func:`hwgen.cli.models.load_source` takes them)."""
    from hwgen.nn import load_digits_images, load_digits_split

    return (load_digits_split() if name == "mlp" else load_digits_images())[3]


def _test_set(name, source, network, samples):
    """The test inputs: the model's own samples quantized, their hwgen.nn classes and labels."""
    from hwgen.soc.design import TestSet, reference_classes

    x = network.quantize_input(source.samples[:samples])
    return TestSet(x, reference_classes(network, x), _labels(name)[:len(x)])


def _run(args):
    import hwgen
    from hwgen.boards import BOARDS
    from hwgen.boards.fit import implementation_for
    from hwgen.compiler import CompileError
    from hwgen.soc.board import soc_config
    from hwgen.soc.design import OPTIONAL_UNITS, units_used, write_accelerator
    from hwgen.soc.firmware import write_firmware

    from .models import load_source

    out = output_dir(args.out, "--out")
    _check_tools(args.sim)
    record = record_file(args)
    board = BOARDS[args.board]
    try:
        config = soc_config(board, args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    source = load_source(args.model)

    def compile_model(design):
        return hwgen.compile_for(source.model, design, source.calibration, batch=args.batch)

    try:
        compile_model(config)
        given = OPTIONAL_UNITS if args.config else \
            [unit for unit in OPTIONAL_UNITS if getattr(args, unit) is not None]
        config, dropped = units_used(compile_model, config, given)
        network, program = compile_model(config)
    except (CompileError, ValueError) as exc:
        raise UsageError(f"MODEL {source.what}: {exc}") from None
    unused = f" (the model needs no {', '.join(dropped)}: left out)" if dropped else ""
    say(f"hwgen soc: {source.what} for {config.name}{unused} ...")
    tests = _test_set(args.model, source, network, args.samples)
    say("hwgen soc: the accelerator's Wishbone top ...")
    # On the board the core is built as `hwgen build` builds it (registered reads, pipelined
    # requantization: the plain netlist's memory paths cross the die); the simulation keeps
    # the plain one (same results).
    implementation = None if args.sim else implementation_for(board, config)
    accel = write_accelerator(config, out / "rtl", implementation)
    try:
        fw = write_firmware(out / "firmware", accel.regs_header, program, tests)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {accel.verilog}, {fw}/hwgen.h, hwgen_model.h, main.c")
    if args.sim:
        from hwgen.soc.sim import run_sim

        console = run_sim(out / "litex-sim", accel.instance(), fw, clock_hz=config.clock_hz,
                          say=say)
        print(console[console.find("hwgen on "):].rstrip() if "hwgen on " in console
              else console)
        if record is not None:
            from hwgen.soc.sim import console_figures

            record_figures(args, record, console_figures(console))
        return 0
    from hwgen.soc.board import build_board

    report = build_board(out / "litex-ulx3s", board, accel.instance(), fw, config.clock_hz,
                         say=say)
    print(report.summary())
    if record is not None:
        record_figures(args, record, report.figures())
    return 0


def register(sub):
    """Add ``hwgen soc``."""
    from hwgen.soc.board import SOC_BOARDS

    from .models import SAMPLES

    p = sub.add_parser(
        "soc", help="the accelerator in a LiteX SoC: a RISC-V CPU runs inference, no host",
        description="Compile MODEL for the board's design, write the accelerator's Wishbone "
                    "top and a firmware (hwgen.h, hwgen_model.h, main.c) and build a LiteX "
                    "SoC with a VexRiscv CPU around them: in LiteX's Verilator simulation "
                    "(--sim; prints the console) or as the board's bitstream. Needs "
                    "pip install 'hwgen[soc]' and Debian's gcc-riscv64-unknown-elf (and for "
                    "--sim libevent-dev libjson-c-dev zlib1g-dev).")
    p.add_argument("--board", choices=sorted(SOC_BOARDS), default="ulx3s-85f",
                   help="the board and its design (default ulx3s-85f: the ulx3s-85f-small "
                        "design, whose block RAM leaves room for the SoC)")
    p.add_argument("--sim", action="store_true",
                   help="run the SoC in LiteX's Verilator simulation instead of building")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp",
                   help="the demo's model, trained on the digits: mlp (default) or cnn")
    p.add_argument("--samples", type=number(int, 1, SAMPLES), default=SAMPLES, metavar="N",
                   help=f"test inputs in the firmware, checked against hwgen.nn (default "
                        f"{SAMPLES})")
    p.add_argument("--batch", type=number(int, 1), default=None, metavar="N",
                   help="rows per run (default: the program's largest)")
    p.add_argument("--out", default="rtl_out/soc", metavar="DIR",
                   help="output folder (default rtl_out/soc)")
    add_record_option(p)
    add_config_options(p)
    p.set_defaults(**dict.fromkeys(_DESIGN_FIELDS))
    p.set_defaults(func=_run)
