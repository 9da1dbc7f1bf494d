"""Offload a batch to an hwgen device and save its answers.

Usage:
    python examples/offload.py URL PROGRAM.npz INPUT.npy [OUTPUT.npy]

URL is any pyserial URL: the simulated board (``socket://127.0.0.1:PORT`` from
``hwgen sim-board``) or a board's serial port (``/dev/ttyUSB1``). PROGRAM.npz is a model compiled
with ``hwgen.compile(...).save(...)``; INPUT.npy holds integer rows already quantized with the
network's ``quantize_input``.
"""

import sys

import numpy as np

from host import Accelerator
from hwgen.compiler import Program


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    url, program_path, input_path = argv[:3]
    program = Program.load(program_path)
    x = np.load(input_path)
    with Accelerator(url, config=program.config) as device:
        device.load(program)
        y = device.infer(x)
        print(f"{len(x)} rows in, {y.shape} out; device counters: {device.counters()}")
    if len(argv) == 4:
        np.save(argv[3], y)
    else:
        print(y)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
