"""Yosys in a board build: the lines the build adds to its script, its options, and the cell
counts of its log.

Reads of memories that never see a read and a write to the same address at once are built
without Yosys's old-word bypass (Amaranth has no way to say so on a read port); memories in
iCE40 SPRAM lose the all-zero initial contents the primitive cannot hold; bracketed signal
names are hidden from ABC9 (:data:`YOSYS_HIDE_BRACKETED_NAMES`).
"""

import re

from .catalog import Family

__all__ = ["YOSYS_HIDE_BRACKETED_NAMES", "parse_yosys_log", "yosys_options"]

_CELLS_RE = re.compile(r"^\s+(\d+)\s+(\S+)\s*$", re.M)

#: The script line that hides bracketed names. Amaranth names the elements of an array-shaped
#: signal `x[0]`, `x[1]` beside `x` itself. When bits of a wire `x` and of a wire `x[0]` both
#: cross ABC9's boundary, Yosys 0.70's reintegration (which rebuilds wide wires from names
#: `x[i]`) trips an assertion: `count_id(wire->name) == 0` or `GetSize(conn.first) ==
#: GetSize(conn.second)`, depending on the netlist. Making the bracketed names private avoids it;
#: the signals keep their unbracketed public names.
YOSYS_HIDE_BRACKETED_NAMES = "rename -hide w:*[[]*"


def yosys_options(board, config):
    """Return the extra ``platform.build`` arguments for Yosys on ``board``:
    ``script_after_read`` (the lines above) and, on the iCE40, ``synth_opts``."""
    from ..device.memories import collision_free_memories
    from ..memattrs import SPRAM_SUFFIX
    from .fit import implementation_for

    # Reads that never collide with a write need no old-word bypass (Amaranth has no way to
    # say so on a read port).
    implementation = implementation_for(board, config)
    lines = [f"setparam -set COLLISION_X_MASK 1'1 t:$memrd_v2 r:MEMID=\\{name} %i"
             for name in collision_free_memories(config, implementation)]
    if implementation.spram:
        # SB_SPRAM256KA has no initial contents: drop the all-zero ones Amaranth gives memories.
        lines.append(f"delete t:$meminit_v2 r:MEMID=*{SPRAM_SUFFIX} %i")
    lines.append(YOSYS_HIDE_BRACKETED_NAMES)
    opts = {"script_after_read": "\n".join(lines)}
    if board.family is Family.ICE40:
        # A clock enable shared by fewer than four flip-flops becomes logic: the eight cells of
        # an iCE40 logic block share one enable, so rare enables leave cells empty, and the
        # router struggles with the cells they spread over. (ABC9's -dff packed a few cells
        # fewer but synthesized far slower, for the same Fmax: docs/performance.md.)
        opts["synth_opts"] = "-dffe_min_ce_use 4"
    return opts


def parse_yosys_log(text):
    """Read the cell counts of the last ``stat`` in a Yosys log: ``{cell type: count}``.

    Both layouts are read: ``N cells`` followed by ``N TYPE`` lines (Yosys 0.5x and later,
    where a ``N submodules`` line may sit among them) and ``Number of cells: N`` (older).
    """
    blocks = re.split(r"^\s+\d+ cells\s*$|Number of cells:?\s*\d*\s*$", text, flags=re.M)
    if len(blocks) < 2:
        return {}
    last = blocks[-1].split("\n\n")[0]
    return {m[2]: int(m[1]) for m in _CELLS_RE.finditer(last)
            if not m[2].startswith("$") and m[2] != "submodules"}
