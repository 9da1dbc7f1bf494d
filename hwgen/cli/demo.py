"""``hwgen demo``: from a trained model to answers from the device, end to end.

Train a 64-32-10 MLP (or, with ``--model cnn``, a small CNN: conv, pool, conv, pool, dense) on
scikit-learn's bundled 8x8 digits (nothing is downloaded), quantize it to int8, generate the
device for the configuration, start the simulated board, offload the whole test split through
:class:`host.Accelerator` and compare the device with the references: each digit's class
(``--output-mode argmax``, the default: the device picks it, one byte back per image) or the
raw scores, bit for bit (``--output-mode scores``). It ends with what a board would do: the
compute-bound rate at the configuration's clock, the rate its UART allows at the board's bridge
speed (``--board``, or ``--baud``; from the wire bytes the simulated board's byte stream carried,
in the busier direction: the UART is full duplex) and which of the two bounds applies.
"""

import time

import numpy as np

from hwgen.config import DTYPES
from hwgen.figures import add_record_option

from .options import (
    BAUD_RANGE,
    SEED_MAX,
    add_config_options,
    device_config_from_args,
    number,
    record_figures,
    record_file,
)

__all__ = ["DemoMismatch", "demo_figures", "register", "run_demo"]

# 8N1: a start bit, eight data bits and a stop bit per byte.
UART_BITS_PER_BYTE = 10


class DemoMismatch(RuntimeError):
    """The device's answers differ from the reference's (int8 or bf16)."""


def _step(message):
    print(f"  {message}", flush=True)


#: The demo's models: what ``--model`` names, with their default training epochs.
MODELS = {"mlp": 40, "cnn": 30}


def train_model(model, epochs=None, seed=0):
    """Train the demo's float ``model`` (``"mlp"`` or ``"cnn"``) as ``hwgen demo`` does;
    return ``(description, trained model, x_train, x_test, y_test)``. ``epochs`` defaults to
    the model's (:data:`MODELS`)."""
    from hwgen.nn import MLP, load_digits_images, load_digits_split, train_digits_cnn

    if model not in MODELS:
        raise ValueError(f"model={model!r}; allowed: {', '.join(MODELS)}")
    epochs = MODELS[model] if epochs is None else epochs
    if model == "mlp":
        x_train, y_train, x_test, y_test = load_digits_split()
        _step(f"training the float MLP on {len(x_train)} images ({epochs} epochs) ...")
        trained = MLP([64, 32, 10], seed=seed).fit(x_train, y_train, epochs=epochs, seed=seed)
        what = "digits 64-32-10 MLP"
    else:
        x_train, y_train, x_test, y_test = load_digits_images()
        _step(f"training the float CNN on {len(x_train)} images ({epochs} epochs) ...")
        trained = train_digits_cnn(epochs=epochs, seed=seed)
        what = "digits CNN (conv 3x3 8, pool 2, conv 3x3 16, pool 2, dense 10)"
    return what, trained, x_train, x_test, y_test


def _train(model, epochs, seed, config):
    """Return ``(description, float accuracy, reference network, test images, labels)``: the
    network quantized to int8, or on a bf16 design rounded to bf16."""
    from hwgen.nn import quantize, to_bf16

    what, trained, x_train, x_test, y_test = train_model(model, epochs, seed)
    float_acc = trained.accuracy(x_test, y_test)
    if config.dtype == "bf16":
        _step("rounding to bf16 (fp32 biases and sums; nothing to calibrate) ...")
        return what, float_acc, to_bf16(trained, rows=config.rows), x_test, y_test
    _step("quantizing to int8 with the training split as calibration data ...")
    net = quantize(trained, x_train, in_bits=config.in_bits, w_bits=config.w_bits,
                   acc_bits=config.acc_bits, mult_bits=config.mult_bits)
    return what, float_acc, net, x_test, y_test


def run_demo(config, *, model="mlp", epochs=None, seed=0, progress=True, uart=False,
             baud=None, output="argmax", board=None):
    """Run the demo on ``config`` and return its figures as a ``dict``.

    ``model`` is ``"mlp"`` or ``"cnn"``; ``epochs`` defaults to the model's
    (:data:`MODELS`). ``output`` is ``"argmax"`` (the device answers each image's class) or
    ``"scores"`` (its raw scores). ``baud`` is the UART rate of the link-bound projection;
    by default the rate of ``board``'s build (:func:`host.rate.serial_rate`), or
    :data:`~hwgen.protocol.DEFAULT_BAUD` without one.

    Raises
    ------
    DemoMismatch
        If the device output (scores, or classes) differs from the reference's (int8, or
        bf16 on a ``dtype="bf16"`` design) in any row, bit for bit.
    """
    import hwgen
    from host import Accelerator
    from host.rate import serial_rate
    from hwgen.cycles import program_cycles
    from hwgen.protocol import DEFAULT_BAUD
    from sim.board import SimulatedBoard

    if model not in MODELS:
        raise ValueError(f"model={model!r}; allowed: {', '.join(MODELS)}")
    if output not in ("argmax", "scores"):
        raise ValueError(f"output={output!r}; allowed: 'argmax' or 'scores'")
    epochs = MODELS[model] if epochs is None else epochs
    if baud is None:
        baud = DEFAULT_BAUD if board is None else serial_rate(board=board)
    start = time.perf_counter()
    print(f"hwgen demo: {model} on {config.name} (config hash {config.hash})")
    what, float_acc, net, x_test, y_test = _train(model, epochs, seed, config)
    print(f"  model: {what}")
    x_q = net.quantize_input(x_test)
    reference = net.forward(x_q)
    reference_acc = float(np.mean(np.argmax(reference, axis=1) == y_test))
    program = hwgen.compile(net, config, output=output)
    _step(f"compiled: {len(net.layers)} layers in {len(program.descriptors)} device passes, "
          f"{program.batch} images per run")
    _step("building and starting the simulated board (first time: about a minute) ...")
    with SimulatedBoard(config, uart=uart) as sim_board:
        _step(f"offloading {len(x_q)} test images to {sim_board.url} ...")
        with Accelerator(sim_board.url, config=config, progress=progress) as acc:
            acc.load(program)
            t0 = time.perf_counter()
            device_out = acc.infer(x_q)
            infer_wall = time.perf_counter() - t0
            counters = acc.counters()
            packed = acc.info.version >= 6
    expected = reference if output == "scores" else np.argmax(reference, axis=1)
    mismatched = _mismatched_rows(device_out, expected)
    if mismatched:
        raise DemoMismatch(
            f"the device output ({output}) differs from the {config.dtype} reference's in "
            f"{mismatched} of {len(x_q)} rows: the generated hardware does not follow the "
            "arithmetic contract")
    classes = device_out if output == "argmax" else np.argmax(device_out, axis=1)
    device_acc = float(np.mean(classes == y_test))

    # Cycles the device spends per image at full batches (the cycle model equals the RTL).
    full = program.batch
    cycles_per_row = program_cycles(program, full) / full
    utilization = program.macs_per_row / (config.rows * config.cols * cycles_per_row)
    rows = len(x_q)
    wire_per_row = counters.wire_bytes / rows
    sent, received = counters.bytes_sent / rows, counters.bytes_received / rows
    compute_rate = config.clock_hz / cycles_per_row
    # Full duplex: a version 6 host overlaps the directions; before, they took turns.
    link_rate = baud / UART_BITS_PER_BYTE / (max(sent, received) if packed else wire_per_row)
    return {
        "float_accuracy": float_acc,
        "dtype": config.dtype,
        "reference_accuracy": reference_acc,
        "device_accuracy": device_acc,
        "cycles_per_inference": cycles_per_row,
        "utilization": utilization,
        "inferences_per_second": compute_rate,
        "wire_bytes_per_inference": wire_per_row,
        "sent_bytes_per_inference": sent,
        "received_bytes_per_inference": received,
        "output": output,
        "board": board,
        "payload_bytes_per_inference": counters.payload_bytes / rows,
        "baud": baud,
        "link_inferences_per_second": link_rate,
        "end_to_end_inferences_per_second": min(compute_rate, link_rate),
        "bound": "link" if link_rate < compute_rate else "compute",
        "elapsed_s": time.perf_counter() - start,
        "offload_s": infer_wall,
        "rows": rows,
        "program": program,
    }


def _mismatched_rows(got, expected):
    """The rows where ``got`` differs from ``expected``; float scores compared by their bits
    (a NaN equals the same NaN)."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.dtype.kind == "f":
        got, expected = got.view(np.uint32), expected.astype(np.float32).view(np.uint32)
    return int(np.sum(np.any((got != expected).reshape(len(got), -1), axis=1)))


def _print_table(config, f):
    bound = ("the link is the bound" if f["bound"] == "link"
             else "the array is the bound")
    rows = [
        ("float accuracy", f"{f['float_accuracy']:.2%}"),
        (f"{f['dtype']} reference accuracy", f"{f['reference_accuracy']:.2%}"),
        ("device accuracy", f"{f['device_accuracy']:.2%} ("
                            + (f"bit-exact with the {f['dtype']} reference)"
                               if f["output"] == "scores"
                               else f"the device's argmax equals the {f['dtype']} "
                                    "reference's)")),
        ("cycles per inference", f"{f['cycles_per_inference']:.1f}"),
        ("array utilization", f"{f['utilization']:.1%}"),
        ("compute-bound inferences/s",
         f"{f['inferences_per_second']:,.0f} at {config.clock_hz / 1e6:g} MHz"),
        ("wire bytes per inference",
         f"{f['sent_bytes_per_inference']:.1f} to the device, "
         f"{f['received_bytes_per_inference']:.1f} back ({f['payload_bytes_per_inference']:.1f}"
         f" of them input and output data, {f['output']}; measured on the simulated board's "
         "byte stream)"),
        ("link-bound inferences/s",
         f"{f['link_inferences_per_second']:,.0f} over a {f['baud']:,} baud UART (8N1, "
         f"full duplex: the busier direction)"
         + (f", the {f['board']}'s build" if f["board"] else "")),
        ("end to end on a board", f"{f['end_to_end_inferences_per_second']:,.0f} inferences/s: "
                                  f"{bound}"),
        ("offload of the test split", f"{f['rows']} images in {f['offload_s']:.2f} s "
                                      "(simulated board)"),
        ("elapsed", f"{f['elapsed_s']:.1f} s"),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")


def demo_figures(config, f):
    """Return the demo's figures ``f`` (:func:`run_demo`'s) as the record keeps them: numbers,
    percentages in percent."""
    return {
        "float_accuracy_pct": 100 * f["float_accuracy"],
        f"{f['dtype']}_accuracy_pct": 100 * f["reference_accuracy"],
        "device_accuracy_pct": 100 * f["device_accuracy"],
        "cycles_per_inference": f["cycles_per_inference"],
        "utilization_pct": 100 * f["utilization"],
        "clock_mhz": config.clock_hz / 1e6,
        "compute_inferences_per_s": f["inferences_per_second"],
        "sent_bytes_per_inference": f["sent_bytes_per_inference"],
        "received_bytes_per_inference": f["received_bytes_per_inference"],
        "payload_bytes_per_inference": f["payload_bytes_per_inference"],
        "baud": f["baud"],
        "link_inferences_per_s": f["link_inferences_per_second"],
        "end_to_end_inferences_per_s": f["end_to_end_inferences_per_second"],
        "batch": f["program"].batch,
        "elapsed_s": f["elapsed_s"],
    }


def _run(args):
    import sys

    config = device_config_from_args(args)
    record = record_file(args)
    try:
        figures = run_demo(config, model=args.model, epochs=args.epochs, seed=args.seed,
                           progress=not args.no_progress, uart=args.uart, baud=args.baud,
                           output=args.output_mode, board=args.board)
    except DemoMismatch as exc:
        print(f"hwgen demo: FAILED: {exc}", file=sys.stderr)
        return 1
    _print_table(config, figures)
    if record is not None:
        record_figures(args, record, demo_figures(config, figures), drop=("--no-progress",))
    return 0


def register(sub):
    """Add ``hwgen demo``."""
    from hwgen.boards import BOARDS
    from hwgen.protocol import DEFAULT_BAUD

    p = sub.add_parser("demo", help="train, quantize, generate and run the digits demo",
                       description="The main job: train an MLP (or a CNN) on the bundled "
                                   "digits, quantize it to int8 (or with --dtype bf16 round it "
                                   "to bf16), generate the device, run the test split on the "
                                   "simulated board through the host driver and print "
                                   "accuracy, cycles and what a board's link allows.")
    add_config_options(p, dtypes=DTYPES)
    p.add_argument("--model", choices=sorted(MODELS), default="mlp",
                   help="mlp: 64-32-10 (default); cnn: conv 3x3 8, pool 2, conv 3x3 16, "
                        "pool 2, dense 10")
    p.add_argument("--epochs", type=number(int, 1, 10_000), default=None,
                   help="training epochs, 1..10000 (default: 40 for the MLP, 30 for the CNN)")
    p.add_argument("--seed", type=number(int, 0, SEED_MAX), default=0,
                   help="random seed of the training (default 0)")
    p.add_argument("--uart", action="store_true",
                   help="simulate the UART too (slower; the bytes are the same)")
    p.add_argument("--baud", type=number(int, *BAUD_RANGE), default=None,
                   help="UART rate of the link-bound projection (default: the rate of "
                        f"--board's build, else {DEFAULT_BAUD})")
    p.add_argument("--board", choices=sorted(BOARDS), default=None,
                   help="the board whose USB bridge's rate the link-bound projection takes "
                        "(its build's, as hwgen build --board makes it)")
    p.add_argument("--output-mode", choices=("argmax", "scores"), default="argmax",
                   help="argmax: the device answers each image's class (default); scores: "
                        "the raw scores, checked bit for bit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_record_option(p)
    p.set_defaults(func=_run)
    return p
