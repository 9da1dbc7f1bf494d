"""``hwgen demo``: from a trained model to answers from the device, end to end.

Train a 64-32-10 MLP on scikit-learn's bundled digits (nothing is downloaded), quantize it to
int8, generate the device for the configuration, start the simulated board, offload the whole
test split through :class:`host.Accelerator` and compare the device with the references.
"""

import time

import numpy as np

__all__ = ["DemoMismatch", "register_cli", "run_demo"]


class DemoMismatch(RuntimeError):
    """The device's answers differ from the int8 reference."""


def _step(message):
    print(f"  {message}", flush=True)


def run_demo(config, *, epochs=40, seed=0, progress=True, uart=False):
    """Run the demo on ``config`` and return its figures as a ``dict``.

    Raises
    ------
    DemoMismatch
        If the device output differs from the int8 reference in any row.
    """
    import hwgen
    from host import Accelerator
    from hwgen.cycles import program_cycles
    from hwgen.nn import MLP, load_digits_split, quantize
    from sim.board import SimulatedBoard

    start = time.perf_counter()
    print(f"hwgen demo: digits 64-32-10 MLP on {config.name} (config hash {config.hash})")
    x_train, y_train, x_test, y_test = load_digits_split()
    _step(f"training the float MLP on {len(x_train)} images ({epochs} epochs) ...")
    mlp = MLP([64, 32, 10], seed=seed).fit(x_train, y_train, epochs=epochs, seed=seed)
    float_acc = mlp.accuracy(x_test, y_test)
    _step("quantizing to int8 with the training split as calibration data ...")
    net = quantize(mlp, x_train, in_bits=config.in_bits, w_bits=config.w_bits,
                   acc_bits=config.acc_bits, mult_bits=config.mult_bits)
    x_q = net.quantize_input(x_test)
    reference = net.forward(x_q)
    int8_acc = float(np.mean(np.argmax(reference, axis=1) == y_test))
    program = hwgen.compile(net, config)
    _step(f"compiled: {len(program.descriptors)} layers, {program.batch} rows per run")
    _step("building and starting the simulated board (first time: about a minute) ...")
    with SimulatedBoard(config, uart=uart) as board:
        _step(f"offloading {len(x_q)} test images to {board.url} ...")
        with Accelerator(board.url, config=config, progress=progress) as acc:
            acc.load(program)
            t0 = time.perf_counter()
            device_out = acc.infer(x_q)
            infer_wall = time.perf_counter() - t0
    mismatched = int(np.sum(np.any(device_out != reference, axis=1)))
    if mismatched:
        raise DemoMismatch(
            f"the device output differs from the int8 reference in {mismatched} of "
            f"{len(x_q)} rows: the generated hardware does not follow the arithmetic contract")
    device_acc = float(np.mean(np.argmax(device_out, axis=1) == y_test))

    # Cycles the device spends per image at full batches (the cycle model equals the RTL).
    full = program.batch
    cycles_per_row = program_cycles(program, full) / full
    useful = program.macs_per_row
    utilization = useful / (config.rows * config.cols * cycles_per_row)
    return {
        "float_accuracy": float_acc,
        "int8_accuracy": int8_acc,
        "device_accuracy": device_acc,
        "cycles_per_inference": cycles_per_row,
        "utilization": utilization,
        "inferences_per_second": config.clock_hz / cycles_per_row,
        "elapsed_s": time.perf_counter() - start,
        "offload_s": infer_wall,
        "rows": len(x_q),
    }


def _print_table(config, f):
    rows = [
        ("float accuracy", f"{f['float_accuracy']:.2%}"),
        ("int8 reference accuracy", f"{f['int8_accuracy']:.2%}"),
        ("device accuracy", f"{f['device_accuracy']:.2%} (bit-exact with the int8 reference)"),
        ("cycles per inference", f"{f['cycles_per_inference']:.1f}"),
        ("array utilization", f"{f['utilization']:.1%}"),
        ("projected inferences/s",
         f"{f['inferences_per_second']:,.0f} at {config.clock_hz / 1e6:g} MHz"),
        ("offload of the test split", f"{f['rows']} images in {f['offload_s']:.2f} s"),
        ("elapsed", f"{f['elapsed_s']:.1f} s"),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")


def _cmd_demo(args):
    import sys

    from .cli import config_from_args

    config = config_from_args(args)
    try:
        figures = run_demo(config, epochs=args.epochs, seed=args.seed,
                           progress=not args.no_progress, uart=args.uart)
    except DemoMismatch as exc:
        print(f"hwgen demo: FAILED: {exc}", file=sys.stderr)
        return 1
    _print_table(config, figures)
    return 0


def register_cli(sub):
    """Add ``hwgen demo``."""
    from .cli import add_config_options

    p = sub.add_parser("demo", help="train, quantize, generate and run the digits demo")
    add_config_options(p)
    p.add_argument("--epochs", type=int, default=40, help="training epochs (default 40)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--uart", action="store_true",
                   help="simulate the UART too (slower; the bytes are the same)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_demo)
