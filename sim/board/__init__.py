"""The simulated board: the device's Verilog under Verilator, serving its byte link over TCP.

:class:`SimulatedBoard` builds the device for an :class:`~hwgen.config.AcceleratorConfig` with a
small C++ harness (``sim/board_main.cpp``) and runs it as a subprocess that listens on
``127.0.0.1``. A host opens it like a serial port, with the pyserial URL :attr:`SimulatedBoard.url`
(``socket://127.0.0.1:PORT``), and talks :mod:`hwgen.protocol` to it exactly as to a board:

.. code-block:: python

    with SimulatedBoard(config) as board:
        with host.Accelerator(board.url, config=config) as acc:
            acc.load(program)
            y = acc.infer(x)

The modules, in the order a board comes to life:

- :mod:`~sim.board.cache`: where built boards are kept and when a build is needed
  (:func:`board_binary`, :func:`board_cache_root`): keys, index, locks, pruning;
- :mod:`~sim.board.wrapper`: the Verilog module the harness drives around the device;
- :mod:`~sim.board.build`: the Verilator build of harness, device and wrapper, and the
  harness's run-time arguments (:func:`frame_timeout_cycles`, :func:`board_missing`);
- :mod:`~sim.board.process`: :class:`SimulatedBoard` (the harness's process, its port, its
  :class:`BoardStats`);
- :mod:`~sim.board.netlist`: the gate-level board, the netlist of ``hwgen build`` under the
  same harness (:meth:`SimulatedBoard.from_build`);
- :mod:`~sim.board.errors`: :class:`BoardError`, of which :class:`NetlistError` is a kind.
"""

from .build import board_missing, frame_timeout_cycles
from .cache import board_binary, board_cache_root
from .errors import BoardError
from .netlist import NetlistError
from .process import BoardStats, SimulatedBoard

__all__ = ["BoardError", "BoardStats", "NetlistError", "SimulatedBoard", "board_binary",
           "board_cache_root", "board_missing", "frame_timeout_cycles"]
