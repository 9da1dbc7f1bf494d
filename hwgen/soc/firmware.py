"""The SoC's firmware sources: the driver ``hwgen.h``, ``main.c``, the model image and a
Makefile, written into one folder, and their compilation with LiteX's software build.

The fixed files are Python strings (:mod:`hwgen.soc.c_driver`, :mod:`~hwgen.soc.c_main`,
:mod:`~hwgen.soc.c_makefile`); the model image comes from
:func:`hwgen.soc.model_image.model_header`; ``hwgen_regs.h`` (the register map) is the
Wishbone top's, written beside its Verilog by ``hwgen generate --top wishbone``.
"""

import shutil
import subprocess
from pathlib import Path

from .c_driver import HWGEN_H
from .c_main import MAIN_C
from .c_makefile import MAKEFILE
from .model_image import MODEL_HEADER, model_header

__all__ = ["C_FILES", "compile_firmware", "write_firmware"]

#: The firmware's fixed sources: file name -> text.
C_FILES = {"hwgen.h": HWGEN_H, "main.c": MAIN_C, "Makefile": MAKEFILE}


def write_firmware(out, regs_header, program, tests):
    """Write the firmware's sources into folder ``out``; return ``out`` as a Path.

    ``regs_header`` is the design's ``hwgen_regs.h``, ``program`` the compiled model and
    ``tests`` a :class:`hwgen.soc.design.TestSet` (inputs, reference classes, labels), as
    :func:`~hwgen.soc.model_image.model_header` takes them.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in C_FILES.items():
        (out / name).write_text(text)
    shutil.copyfile(regs_header, out / "hwgen_regs.h")
    (out / MODEL_HEADER).write_text(model_header(program, tests.x, tests.reference, tests.labels))
    return out


def compile_firmware(src, litex_build):
    """Compile the firmware in ``src`` against the LiteX build folder ``litex_build`` (whose
    ``software/`` the builder has made); return the path of ``firmware.bin``.

    Raises
    ------
    RuntimeError
        With the compiler's output, when ``make`` fails.
    """
    from litex.soc.software import demo

    src = Path(src)
    # LiteX's demo linker script: code and data in main RAM, the stack in SRAM.
    shutil.copyfile(Path(demo.__file__).parent / "linker.ld", src / "linker.ld")
    done = subprocess.run(["make", "-C", str(src), f"BUILD_DIR={Path(litex_build).resolve()}"],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"the firmware did not compile:\n{done.stdout[-3000:]}"
                           f"{done.stderr[-3000:]}")
    return src / "firmware.bin"
