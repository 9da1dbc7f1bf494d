"""Helpers the tests share, one file per concern (on the path through
``pythonpath = ["tests"]``; test modules never import each other):

- :mod:`.accelerator_sim`: the accelerator driven through its host port in the Amaranth
  simulator, with a watch on every memory that must never see a read meet a write;
- :mod:`.networks`: the compiler's test configurations, the descriptor fields as documented,
  random dense networks and their inputs;
- :mod:`.boards`: small board designs, a started board, socket helpers, Icarus, YoWASP and the
  iCE40 cell models;
- :mod:`.shared_build`: the one small board build a test session shares;
- :mod:`.simulators`: which cocotb cases also run on Icarus by default;
- :mod:`.schedule`: the longest tests first in a ``pytest -n 2`` run;
- :mod:`.cocotb_builds`: one build per design and simulator for a hypothesis test's runs;
- :mod:`.bf16_draws`: hypothesis strategies of bf16 work (column tiles, whole MLPs);
- :mod:`.frame_bench`: the frame engine between a byte link and a behavioural accelerator;
- :mod:`.blocks`, :mod:`.walk`, :mod:`.controller_model`, :mod:`.read_port`: the accelerator's
  blocks alone, their neighbours as Python models (one file per model).
- :mod:`.formal`: the SymbiYosys runner of the proofs (tests/formal), and :mod:`.frame_proofs`
  what the frame engine's two proofs share.
- :mod:`.bf16_reference`: a scalar model of the bfloat16 rules (exact fractions, one float32
  operation at a time), for :mod:`hwgen.nn.bf16` and :class:`hwgen.nn.Bf16Network`.

The one Python model of the whole device is :class:`sim.interpreter.ProgramInterpreter`.
"""

from sim.interpreter import run_on_interpreter

from .accelerator_sim import (
    ECP5,
    ECP5_85F,
    ICE40,
    SMALL,
    run_program,
    run_random_network,
    without_dsp,
)
from .blocks import descriptor, image_geometry, plain_geometry, random_bits, random_image_layer
from .boards import (
    BOARD_OS,
    BOARD_SMALL,
    BOARD_WS,
    host_port,
    ice40_cells_sim,
    need_icarus_and_cells,
    port_refused,
    run_icarus,
    skip_without_board,
    started_board,
    yowasp_missing,
)
from .controller_model import ControllerOutputs
from .frame_bench import BUSY_CYCLES, TINY, LinkDriver, build_frame_bench, rows_per_run, run_bench
from .networks import (
    COMPILER_CONFIGS,
    assert_interpreted,
    check_against_reference,
    compile_refused,
    documented_descriptor_fields,
    documented_geometry_fields,
    random_dense_network,
    random_input_rows,
    small_dense_network,
)
from .read_port import ReadPortModel
from .shared_build import (
    TINY_DEVICE,
    TINY_GOWIN_DEVICE,
    shared_root,
    tiny_device_build,
    tiny_gowin_build,
)
from .simulators import need_simulator, on_simulators
from .sweeps import each_once
from .walk import walk_rows

__all__ = [
    "BOARD_OS",
    "BOARD_SMALL",
    "BOARD_WS",
    "BUSY_CYCLES",
    "COMPILER_CONFIGS",
    "ECP5",
    "ECP5_85F",
    "ICE40",
    "SMALL",
    "TINY",
    "TINY_DEVICE",
    "TINY_GOWIN_DEVICE",
    "ControllerOutputs",
    "LinkDriver",
    "ReadPortModel",
    "assert_interpreted",
    "build_frame_bench",
    "check_against_reference",
    "compile_refused",
    "descriptor",
    "documented_descriptor_fields",
    "documented_geometry_fields",
    "each_once",
    "host_port",
    "ice40_cells_sim",
    "image_geometry",
    "need_icarus_and_cells",
    "need_simulator",
    "on_simulators",
    "plain_geometry",
    "port_refused",
    "random_bits",
    "random_dense_network",
    "random_image_layer",
    "random_input_rows",
    "rows_per_run",
    "run_bench",
    "run_icarus",
    "run_on_interpreter",
    "run_program",
    "run_random_network",
    "shared_root",
    "skip_without_board",
    "small_dense_network",
    "started_board",
    "tiny_device_build",
    "tiny_gowin_build",
    "walk_rows",
    "without_dsp",
    "yowasp_missing",
]
