"""The depthwise unit's tile plan: which delay line each array row takes in a reduction tile
(:func:`hwgen.passes.depthwise.tile_plan`, in counters)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..memmap import geometry_layout
from .layouts import dw_sel_layout

__all__ = ["TileTaps"]


class TileTaps(wiring.Component):
    """Where each array row's tap lies in a reduction tile, and the lines the rows take.

    Row ``i`` of tile ``kt`` is tap ``t = kt * rows + i`` (``rows`` the config's ``array_rows``),
    ``(ky, kx) = divmod(t, kw)``: each row keeps ``ky`` and ``kx`` as counters, set for tile 0
    from a table over ``kw`` and moved on by ``divmod(rows, kw)`` (the geometry's ``dw_tq``,
    ``dw_tr``) per tile, the row by one more where its column passes ``kw``: no divider. From
    them: the tile's span of kernel rows, its first tap's kernel row and column (of the
    counters, in the cycle after a move), and a cycle later (registers) each row's line
    ``ky_max - ky`` (past the kernel ``zero``, the code :func:`~hwgen.device.layouts.sel_bits`
    leaves for it).

    Members
    -------
    geom : In(geometry_layout(config))
        ``kh``, ``kw``, ``dw_tq``, ``dw_tr``: held while the layer runs.
    first : In(1)
        The rows go to tile 0 (from the next cycle on).
    step : In(1)
        The rows go to the next tile.
    wraps0 : Out(1)
        In a ``step``: row 0's column passes ``kw`` (its kernel row moves on by ``dw_tq + 1``).
    lines : Out(dw_sel_layout(config))
    span : Out(range(dw_lines + 2))
        ``ky_max - ky_min + 1``.
    ky0, kx0 : Out
        Row 0's kernel row (``ky_min``) and column.
    """

    def __init__(self, config):
        self.config = config
        geom = geometry_layout(config)
        super().__init__({
            "geom": In(geom),
            "first": In(1),
            "step": In(1),
            "wraps0": Out(1),
            "lines": Out(dw_sel_layout(config)),
            "span": Out(range(config.dw_lines + 2)),
            "ky0": Out(geom.members["kh"].width + 1),
            "kx0": Out(geom.members["kw"]),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, g = self.config, self.geom
        rows = cfg.array_rows
        # A row's kernel row may pass the kernel's last by a tile's taps (rows past it).
        ky = [Signal.like(self.ky0, name=f"tap_ky{i}") for i in range(rows)]
        kx = [Signal.like(g.kw, name=f"tap_kx{i}") for i in range(rows)]
        wrap_at = Signal.like(g.kw, name="tap_wrap_at")      # kw - tr: a column passes kw
        m.d.sync += wrap_at.eq(g.kw - g.dw_tr)
        with m.If(self.first):
            for i in range(rows):
                q, r = self._first(m, i)
                m.d.sync += [ky[i].eq(q), kx[i].eq(r)]
        with m.Elif(self.step):
            for i in range(rows):
                wraps = kx[i] >= wrap_at
                m.d.sync += [kx[i].eq(Mux(wraps, kx[i] - wrap_at, kx[i] + g.dw_tr)),
                             ky[i].eq(ky[i] + g.dw_tq + wraps)]
        m.d.comb += self.wraps0.eq(kx[0] >= wrap_at)
        # The plan, a cycle after the counters.
        top = Mux(ky[-1] < g.kh, ky[-1], g.kh - 1)      # ky_max: rows' kernel rows rise
        zero = cfg.dw_lines + 1
        for i in range(rows):
            m.d.sync += self.lines[i].eq(Mux(ky[i] < g.kh, top - ky[i], zero))
        m.d.comb += [self.span.eq(top - ky[0] + 1), self.ky0.eq(ky[0]), self.kx0.eq(kx[0])]
        return m

    def _first(self, m, i):
        """Return row ``i``'s ``divmod(i, kw)`` of tile 0: a table over ``kw``."""
        q = Signal(range(max(2, self.config.array_rows)), name=f"tap_q0_{i}")
        r = Signal(range(max(2, self.config.array_rows)), name=f"tap_r0_{i}")
        with m.Switch(self.geom.kw):
            for k in range(1, i + 1):
                with m.Case(k):
                    m.d.comb += [q.eq(i // k), r.eq(i % k)]
            with m.Default():
                m.d.comb += [q.eq(0), r.eq(i)]
        return q, r
