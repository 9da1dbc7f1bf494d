"""What ``hwgen soc`` needs from outside hwgen, each missing piece named with what installs it.

LiteX and its CPU come from PyPI (``pip install 'hwgen[soc]'``); the firmware needs Debian's
RISC-V GCC; LiteX's Verilator simulation (``--sim``) compiles its C modules against libevent,
json-c and zlib, whose headers come from Debian's ``-dev`` packages. Each is looked for before
anything is built, so that a missing one is one line naming the package, not a compiler's
traceback halfway through the build.
"""

import importlib.util
import shutil
import subprocess

__all__ = ["SIM_HEADERS", "header_found", "missing_requirements"]

#: The C headers LiteX's simulation modules include, with the Debian package of each.
SIM_HEADERS = (("event2/listener.h", "libevent-dev"), ("json-c/json.h", "libjson-c-dev"),
               ("zlib.h", "zlib1g-dev"))


def header_found(header, compiler="cc"):
    """Return whether ``compiler``'s preprocessor finds ``#include <header>`` (it searches the
    same folders the build's compiler will)."""
    try:
        done = subprocess.run([compiler, "-E", "-x", "c", "-o", "/dev/null", "-"],
                              input=f"#include <{header}>\n", capture_output=True, text=True,
                              check=False, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def missing_requirements(sim, headers=SIM_HEADERS):
    """Return what ``hwgen soc`` (with ``sim``: its simulation) lacks here, each as
    ``"<what> (<how to install it>)"``; empty when nothing is missing."""
    missing = []
    if importlib.util.find_spec("litex") is None:
        missing.append("litex (pip install 'hwgen[soc]')")
    if shutil.which("riscv64-unknown-elf-gcc") is None:
        missing.append("riscv64-unknown-elf-gcc (apt-get install gcc-riscv64-unknown-elf)")
    if not sim:
        return missing
    for tool, package in (("cc", "gcc"), ("make", "make")):
        if shutil.which(tool) is None:
            missing.append(f"{tool} (apt-get install {package})")
    if shutil.which("cc") is not None:
        packages = [package for header, package in headers if not header_found(header)]
        if packages:
            missing.append(f"the C headers of {', '.join(packages)} (apt-get install "
                           f"{' '.join(packages)})")
    return missing
