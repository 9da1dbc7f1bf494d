"""Attributes that tell Yosys how to build the device's memories.

Shared by the memories' owners (the accelerator, the frame engine) and the board flow, which
reads them back from the netlist.
"""

import math

__all__ = ["BLOCK_RAM_SHAPES", "LOGIC_RAM_ATTRS", "NO_COLLISION_ATTRS", "SPRAM_ATTRS",
           "SPRAM_SUFFIX", "block_rams"]

#: Block RAM shapes (width, depth) Yosys can map a 1R1W memory onto, by FPGA family (the
#: values of :class:`hwgen.boards.catalog.Family`).
BLOCK_RAM_SHAPES = {
    "ice40": ((16, 256), (8, 512), (4, 1024), (2, 2048)),                   # SB_RAM40_4K
    "ecp5": ((36, 512), (18, 1024), (9, 2048), (4, 4096), (2, 8192), (1, 16384)),  # DP16KD
    # An 18 Kbit BSRAM (SDPB, SDPX9B) as Yosys's synth_gowin maps onto it.
    "gowin": ((36, 512), (18, 1024), (9, 2048), (4, 4096), (2, 8192), (1, 16384)),
}

#: Memory attributes that make Yosys's ``synth_ice40`` map a single-port memory onto
#: ``SB_SPRAM256KA`` blocks (16 bits x 16K each, four on an iCE40UP5K).
SPRAM_ATTRS = {"ram_style": "huge"}
#: Ends the name of every such memory, so that the build can drop their initial contents
#: (all zero; an SPRAM has none).
SPRAM_SUFFIX = "_spram"
#: Marks the memories whose reads never meet a write (see
#: :func:`hwgen.device.memories.collision_free_memories`) for readers of the netlist. Yosys
#: heeds ``no_rw_check`` only where it merges a register into an asynchronous read port, and
#: Amaranth's read ports are synchronous already, so the board build sets the read ports' mask
#: itself.
NO_COLLISION_ATTRS = {"no_rw_check": 1}

#: Memory attributes that make Yosys build a small memory from logic cells' RAM (ECP5
#: ``TRELLIS_DPR16X4``) rather than a block RAM: the depthwise unit's delay lines, a few dozen
#: words each, which would take a DP16KD apiece from designs that need every block RAM.
LOGIC_RAM_ATTRS = {"ram_style": "distributed"}


def block_rams(family, width, depth):
    """Return the fewest block RAMs of ``family`` that hold a ``width`` x ``depth`` memory."""
    return min(math.ceil(width / w) * math.ceil(depth / d) for w, d in BLOCK_RAM_SHAPES[family])
