"""``hwgen train``: train the digits model with its matrix products on accelerators.

.. code-block:: sh

    hwgen train --devices 2 --epochs 10 --out digits.npz     # two simulated boards
    hwgen train --url socket://lab1:4600 --url /dev/ttyUSB1   # boards (hwgen serve, a port)

Starts ``--devices`` simulated boards of the configuration (the default 8x8 int8 design, or
its 16-bit variant with ``--bits 16``) or opens the boards at ``--url``, trains the digits MLP
(or CNN) data parallel across them with :class:`hwgen.train.Trainer`, prints each epoch's
figures and saves the trained network and its program (``--out``, a program file that
``hwgen infer`` takes as it is).

``--dtype bf16`` trains the MLP as TPUs train (:class:`hwgen.train.Bf16Trainer`: fp32 master
weights, bf16 products summed in fp32 on the devices), on simulated boards of the bf16 core,
whose design is dense (``--spatial 0`` by default with ``--dtype bf16``).
"""

import contextlib
import dataclasses
import time

from hwgen.config import DTYPES

from .options import (
    SEED_MAX,
    UsageError,
    add_config_options,
    dense_bf16_defaults,
    device_config_from_args,
    number,
    output_file,
    read_key_file,
    say,
)

__all__ = ["register", "training_config"]

#: Accumulator width of the 16-bit variant: a reduction of max_k 16x16-bit products (42 bits
#: for the default max_k) and room for the biases of the forward pass.
WIDE_ACC_BITS = 48


def training_config(config, bits):
    """Return ``config`` with ``in_bits = w_bits = bits`` and, for 16 bits, an accumulator of
    at least :data:`WIDE_ACC_BITS` (and of what ``max_k`` needs)."""
    if bits == config.in_bits == config.w_bits:
        return config
    acc_bits = config.acc_bits
    if bits > 8:
        acc_bits = max(acc_bits, WIDE_ACC_BITS, config.min_acc_bits(bits, bits, config.max_k))
    return dataclasses.replace(config, in_bits=bits, w_bits=bits, acc_bits=acc_bits)


def _config(args):
    # bf16 trains MLPs: a dense design, the smaller simulated board.
    dense_bf16_defaults(args)
    config = device_config_from_args(args)
    if config.dtype == "bf16":
        if args.bits is not None:
            raise UsageError(f"--bits {args.bits} with --dtype bf16, whose operands are bf16 "
                             "and sums fp32; allowed: --bits with --dtype int8 only")
        if args.model != "mlp":
            raise UsageError(f"--model {args.model} with --dtype bf16; allowed: --model mlp "
                             "(convolutions are not trained in bf16 yet)")
        return config
    if args.bits is None:
        return config
    if (config.in_bits, config.w_bits) not in ((8, 8), (args.bits, args.bits)):
        raise UsageError(f"--bits {args.bits} with --in-bits {config.in_bits} --w-bits "
                         f"{config.w_bits}; allowed: --bits, or --in-bits/--w-bits, not both")
    try:
        return training_config(config, args.bits)
    except ValueError as exc:
        raise UsageError(f"--bits {args.bits}: {exc}") from None


def _model(args):
    """Return ``(model, (x_train, y_train, x_test, y_test))`` of ``--model``."""
    from hwgen.nn import MLP, digits_cnn, load_digits_images, load_digits_split

    if args.model == "cnn":
        return digits_cnn(seed=args.seed), load_digits_images()
    return MLP([64, args.hidden, 10], seed=args.seed), load_digits_split()


def _check_compiles(model, data, config):
    """Refuse, before any board starts, a model the configuration cannot run with read-out
    (int8), or at all (bf16, whose training runs a program per layer)."""
    import hwgen
    from hwgen.compiler import CompileError
    from hwgen.nn import quantize, to_bf16

    if config.dtype == "bf16":
        network, how = to_bf16(model, rows=config.rows), ""
    else:
        network = quantize(model, data[0][:64], in_bits=config.in_bits, w_bits=config.w_bits,
                           acc_bits=config.acc_bits, mult_bits=config.mult_bits)
        how = " with every layer's output read out"
    try:
        hwgen.compile(network, config, readout=config.dtype != "bf16")
    except CompileError as exc:
        raise UsageError(f"--model {model.__class__.__name__.lower()} cannot run on "
                         f"{config.name}{how}: {exc}") from None


def _open_devices(stack, args, config):
    """Start ``--devices`` simulated boards, or open the ``--url`` s; return the
    Accelerators."""
    from host import Accelerator, DeviceError, IncompatibleDevice, LinkError
    from sim.board import BoardError, SimulatedBoard

    key = read_key_file(args.key_file)
    urls = args.url
    if not urls:
        say(f"starting {args.devices} simulated board(s) of {config.name} ...")
        try:
            # The board says when it builds a design (not when it is cached).
            urls = [stack.enter_context(SimulatedBoard(config, log=say)).url
                    for _ in range(args.devices)]
        except BoardError as exc:
            raise UsageError(f"cannot start a simulated board: {exc}") from None
    try:
        return [stack.enter_context(Accelerator(url, config=config, progress=False, key=key))
                for url in urls]
    except (IncompatibleDevice, LinkError, DeviceError) as exc:
        raise UsageError(str(exc)) from None


def _device_errors():
    from host import BusyTimeout, DeviceError, IncompatibleDevice, LinkError

    return (BusyTimeout, DeviceError, IncompatibleDevice, LinkError)


def _progress(args, total):
    if args.no_progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="step", desc="train", leave=False)


def _summary(trainer, started):
    reports = trainer.history
    device = sum(r.device_macs for r in reports)
    host = sum(r.host_macs for r in reports)
    cycles = sum(r.cycles for r in reports)
    wire = sum(r.wire_bytes for r in reports)
    last = reports[-1]
    test = "-" if last.test_accuracy is None else f"{last.test_accuracy:.2%}"
    calibration = f" (the host's {host:,}: calibration)" if host else ""
    return (f"trained {len(reports)} epoch(s) on {len(trainer.group)} device(s): test accuracy "
            f"{test}; {device / (device + host):.2%} of the training's {device + host:,} MACs on "
            f"the devices{calibration}; device cycles {cycles:,}; wire "
            f"{wire / 1e6:.2f} MB; {time.perf_counter() - started:.1f} s")


def _wrote_line(path, layers, program):
    """Return the line that reports the file saved at ``path``: the trained network's
    ``layers`` and the device passes its ``program`` runs them in (a Flatten takes none)."""
    return (f"wrote {path}: the trained network ({layers} layers, {len(program.layers)} device "
            f"passes) and its program (batch {program.batch}; hwgen infer --program {path} "
            "runs it)")


def _run(args):
    from hwgen.train import make_trainer, save_trained

    started = time.perf_counter()
    if args.out is not None:
        output_file(args.out, "--out")
    config = _config(args)
    if args.model == "mlp" and args.hidden is None:
        args.hidden = 32
    elif args.model == "cnn" and args.hidden is not None:
        raise UsageError("--hidden is the MLP's hidden width; allowed with --model mlp only")
    model, (x_train, y_train, x_test, y_test) = _model(args)
    _check_compiles(model, (x_train,), config)
    with contextlib.ExitStack() as stack:
        devices = _open_devices(stack, args, config)
        try:
            trainer = make_trainer(model, config, devices, lr=args.lr, momentum=args.momentum)
        except ValueError as exc:   # a layer one program cannot hold, a device of another design
            raise UsageError(f"--model {args.model} on {config.name}: {exc}") from None
        steps = -(-len(x_train) // args.batch)
        print(f"hwgen train: {args.model} on {len(devices)} device(s) of {config.name}, "
              f"{args.epochs} epoch(s) of {steps} steps of {args.batch}, lr {args.lr:g}, "
              f"momentum {args.momentum:g}", flush=True)
        bar = _progress(args, steps * args.epochs)
        stack.callback(lambda: bar is not None and bar.close())

        def on_step(result):
            if bar is not None:
                bar.update()
                bar.set_postfix(loss=f"{result.loss:.3f}", refresh=False)

        def on_epoch(report):
            (print if bar is None else bar.write)(report.line())

        try:
            trainer.fit(x_train, y_train, epochs=args.epochs, batch_size=args.batch,
                        seed=args.seed, x_test=x_test, y_test=y_test, on_step=on_step,
                        on_epoch=on_epoch)
        except _device_errors() as exc:
            # A board that fails or goes silent is the user's to look at: one line.
            raise UsageError(f"training stopped: {exc}") from None
    print(_summary(trainer, started))
    if args.out is not None:
        program = save_trained(args.out, trainer)
        print(_wrote_line(args.out, len(trainer.layers), program))
    return 0


def register(sub):
    """Add ``hwgen train``."""
    p = sub.add_parser(
        "train", help="train the digits model with its matrix products on accelerators",
        description="Train the digits model by data-parallel minibatch SGD whose matrix "
                    "products run on the devices: the forward pass with every layer's output "
                    "read out, and the backward products dW = X^T dY and dX = dY W^T; the "
                    "loss and the update on the host. By default on simulated boards of the "
                    "design the options describe (8x8 int8). --dtype bf16 trains as TPUs do: "
                    "fp32 master weights, bf16 products summed in fp32 on the devices "
                    "(a dense design: --spatial 0 by default).")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--devices", type=number(int, 1, 16), default=1, metavar="N",
                       help="simulated boards to start, 1..16 (default 1)")
    where.add_argument("--url", action="append", metavar="URL",
                       help="a board's pyserial URL (socket://HOST:PORT of hwgen serve, "
                            "/dev/ttyUSB1, ...); repeat for more boards")
    p.add_argument("--key-file", metavar="PATH",
                   help="key file of the boards that hwgen serve shares with --key-file (the "
                        "same file: its bytes are the key)")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp",
                   help="the digits MLP (64-H-10, the default) or the digits CNN")
    p.add_argument("--hidden", type=number(int, 1, 1024), default=None, metavar="H",
                   help="hidden width of the MLP, 1..1024 (default 32)")
    p.add_argument("--epochs", type=number(int, 1, 10_000), default=10, metavar="E",
                   help="passes over the training split, 1..10000 (default 10)")
    p.add_argument("--batch", type=number(int, 1, 4096), default=64, metavar="B",
                   help="minibatch size, 1..4096, split across the devices (default 64)")
    p.add_argument("--bits", type=int, choices=(8, 16), default=None,
                   help="operand width: 8 (the default design) or 16 (in_bits = w_bits = 16 "
                        f"and acc_bits >= {WIDE_ACC_BITS}, for finer gradients); int8 only")
    p.add_argument("--lr", type=number(float, above=0), default=0.05,
                   help="learning rate, > 0 (default 0.05)")
    p.add_argument("--momentum", type=number(float, 0, 0.999), default=0.9,
                   help="momentum of the SGD, 0..0.999 (default 0.9)")
    p.add_argument("--seed", type=number(int, 0, SEED_MAX), default=0,
                   help="seed of the initial weights and the minibatch order (default 0)")
    p.add_argument("--out", metavar="FILE",
                   help="write the trained network and its program here (.npz)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_options(p, dtypes=DTYPES)
    # Its default depends on --dtype (dense_bf16_defaults).
    p.set_defaults(func=_run, spatial=None)
    return p
