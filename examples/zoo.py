"""Run a model of the zoo bit-exact on a simulated ULX3S-85F board.

Usage:
    python examples/zoo.py [MODEL] [--preset PRESET] [--samples N]

MODEL is one of ``hwgen.models.MODELS`` (``ad``, ``kws``, ``vww``, ``resnet8``, ``lenet5``,
``tutorial_cnn``; default ``resnet8``). Without ``--preset`` the design is the board's preset,
whose one bitstream holds all six; ``--preset ulx3s-85f-resnet8`` is ResNet-8's own, faster
design. Needs PyTorch (``pip install torch --index-url
https://download.pytorch.org/whl/cpu``); the first run builds the design's simulated board,
several minutes.
"""

import argparse
import sys

import hwgen
from host import Accelerator
from hwgen.boards import BOARDS, board_config
from hwgen.boards.catalog import PRESET_NAMES
from hwgen.models import MODELS, get
from hwgen.nn import from_torch, quantize
from sim.board import SimulatedBoard


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="resnet8", choices=sorted(MODELS))
    parser.add_argument("--preset", choices=PRESET_NAMES,
                        help="a named 85F design (default: the board's preset)")
    parser.add_argument("--samples", type=int, default=4, help="inputs to run (default: 4)")
    args = parser.parse_args(argv)

    zoo = get(args.model)                  # a torch module, seeded: nothing is downloaded
    config = board_config(BOARDS["ulx3s-85f"], preset=args.preset)
    net = quantize(from_torch(zoo.model(), input_shape=zoo.input_shape), zoo.calibration(64),
                   acc_bits=config.acc_bits, mult_bits=config.mult_bits)
    program = hwgen.compile(net, config, batch=1)    # every tensor on chip
    x = net.quantize_input(zoo.calibration(args.samples))
    with SimulatedBoard(config) as board, Accelerator(board.url, config=config) as device:
        device.load(program)
        y = device.infer(x)
        counters = device.counters()
    exact = (y == net.forward(x)).all()
    cycles = counters.cycles / len(x)
    print(f"{args.model} on {args.preset or 'ulx3s-85f'}: {len(program.descriptors)} passes, "
          f"{cycles:,.0f} cycles an inference ({cycles / config.clock_hz * 1e3:.2f} ms at "
          f"{config.clock_hz / 1e6:g} MHz), bit-exact: {'yes' if exact else 'NO'}")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
