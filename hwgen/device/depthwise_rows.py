"""The depthwise unit's output cells: a pass's walk over its chunk's output grid, an engine row
per cell, valid at the output positions."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..memmap import geometry_layout
from .layouts import dw_sel_layout

__all__ = ["OutputCells"]


class OutputCells(wiring.Component):
    """Walk a pass's output grid, a cell a cycle, and say which cells are output positions.

    The grid is the padded input's rows ``0 .. rows_last`` (a chunk's output rows times ``sy``,
    counted from its first) by ``dw_wp`` cells; a cell ``(r, c)`` is an output position where
    ``r % sy == 0``, ``c % sx == 0`` and ``c <= dw_delay`` (``(ow - 1) * sx``). The walk starts
    the cycle after ``begin`` and ends at the chunk's last position, ``(rows_last, dw_delay)``,
    which is ``last``. Every decision is a register's: phases count the strides, and each
    counter's end is a flag set a step ahead.

    Members
    -------
    geom : In(geometry_layout(config))
    rows_last : In
        The chunk's last output row times ``sy``, held while the walk runs.
    begin : In(1)
        The walk starts with the next cycle; ``lines`` is the pass's.
    lines : In(dw_sel_layout(config))
    valid, last : Out(1)
        The cell presented is an output position; the pass's last.
    sel : Out(dw_sel_layout(config))
        The pass's lines, from ``begin`` on.
    """

    def __init__(self, config):
        self.config = config
        geom = geometry_layout(config)
        super().__init__({
            "geom": In(geom),
            "rows_last": In(geom.members["oh"].width + 5),
            "begin": In(1),
            "lines": In(dw_sel_layout(config)),
            "valid": Out(1),
            "last": Out(1),
            "sel": Out(dw_sel_layout(config)),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        active = Signal(name="cell_active")
        r_left = Signal.like(self.rows_last, name="cell_r_left")   # rows after this one
        c = Signal.like(g.dw_wp, name="cell_c")
        c_end = Signal(name="cell_c_end")          # c is the row's last cell
        c_out = Signal(name="cell_c_out")          # c <= dw_delay
        c_at = Signal(name="cell_c_at")            # c == dw_delay
        r_phase = Signal.like(g.sy, name="cell_r_phase")
        c_phase = Signal.like(g.sx, name="cell_c_phase")
        position = (r_phase == 0) & (c_phase == 0) & c_out
        final = (r_left == 0) & c_at
        m.d.comb += [self.valid.eq(active & position), self.last.eq(active & position & final)]
        with m.If(self.begin):
            m.d.sync += [active.eq(1), r_left.eq(self.rows_last), c.eq(0), c_end.eq(g.dw_wp == 1),
                         c_out.eq(1), c_at.eq(g.dw_delay == 0), r_phase.eq(0), c_phase.eq(0),
                         self.sel.eq(self.lines)]
        with m.Elif(active):
            with m.If(final):
                m.d.sync += active.eq(0)
            with m.Elif(c_end):
                m.d.sync += [c.eq(0), c_end.eq(g.dw_wp == 1), c_out.eq(1),
                             c_at.eq(g.dw_delay == 0), c_phase.eq(0), r_left.eq(r_left - 1),
                             r_phase.eq(_wrapped(r_phase, g.sy))]
            with m.Else():
                m.d.sync += [c.eq(c + 1), c_end.eq(c + 2 == g.dw_wp),
                             c_out.eq(c + 1 <= g.dw_delay), c_at.eq(c + 1 == g.dw_delay),
                             c_phase.eq(_wrapped(c_phase, g.sx))]
        return m


def _wrapped(phase, stride):
    """Return a stride phase's next value: ``phase + 1``, 0 after ``stride - 1``."""
    return Mux(phase + 1 == stride, 0, phase + 1)
