"""The pooler: a max-pooling layer, as a pass of its own over the activation banks."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..memmap import act_addr_bits, batch_bits, descriptor_layout, geometry_layout
from .last_flag import LastFlag
from .systolic import delay

__all__ = ["Pooler"]


class Pooler(wiring.Component):
    """Max-pool a layer's input images into its output area, one bank word per cycle.

    For each output pixel ``(m, oy, ox)`` (in order) and each of its words ``cw`` (its
    ``act_lanes`` channels at once), the pooler reads the window's words — input pixels
    ``(oy * stride + wy, ox * stride + wx)``, ``wy, wx`` in ``0 .. kh - 1`` — and writes their
    lane-wise maximum at the output pixel's word, ``dst_base + (pixel * src_stride + cw)``. The
    window walks like a convolution's kernel (the geometry's steps), without padding. Pooling
    follows the activation, so the maximum of the saturated values is exact.

    Parameters
    ----------
    config : AcceleratorConfig
    read_latency : int
        Cycles from a read's address to its word (1, or 2 with registered reads, whose words
        then pass a register of the pooler's too: ``done`` comes a cycle later).
    max_unit : callable or None
        Makes a lane's maximum unit, for values whose order is not their bits' as signed
        integers (bf16: :class:`~hwgen.device.bf16_max.BF16Max`): a component with ``a``,
        ``b``, ``y`` and ``latency`` 0, given the maximum so far and the word's value (the
        value twice for a window's first word). None: int8 values, compared as signed.

    Members
    -------
    start : In(1)
        A pooling layer is loaded (``desc``, ``geom``, ``last_row`` are valid from here on).
    go : In(1)
        Start reading (the cycle after ``start`` at the earliest).
    desc : In(descriptor_layout(config))
    geom : In(geometry_layout(config))
    last_row : In(batch_bits(config))
    rd_addr : Out(unsigned(act_addr_bits))
    rd_en : Out(1)
        Every bank reads this word.
    rd_data : In(ArrayLayout(signed(in_bits), act_lanes))
    wr_addr : Out(unsigned(act_addr_bits))
    wr_data : Out(ArrayLayout(signed(in_bits), act_lanes))
    wr_en : Out(1)
        Every bank writes its lane of the word.
    done : Out(1)
        The layer's last word is written (``wr_en`` comes a cycle after the word's last read
        returns, from a register).
    """

    def __init__(self, config, *, read_latency=1, max_unit=None):
        self.config = config
        self.read_latency = read_latency
        self.max_unit = max_unit
        lanes, value = config.act_lanes, signed(config.in_bits)
        addr = unsigned(act_addr_bits(config))
        super().__init__({
            "start": In(1), "go": In(1),
            "desc": In(descriptor_layout(config)),
            "geom": In(geometry_layout(config)),
            "last_row": In(batch_bits(config)),
            "rd_addr": Out(addr), "rd_en": Out(1),
            "rd_data": In(data.ArrayLayout(value, lanes)),
            "wr_addr": Out(addr), "wr_data": Out(data.ArrayLayout(value, lanes)),
            "wr_en": Out(1),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        d, g = self.desc, self.geom
        side = max(1, cfg.act_depth.bit_length())
        active = Signal()
        ox, oy, wx, wy = (Signal(side, name=n) for n in ("ox", "oy", "wx", "wy"))
        img = Signal.like(self.last_row, name="img")
        cw = Signal(range(cfg.act_depth + 1))
        pix = Signal.like(self.rd_addr, name="pix")     # the window's first pixel
        # The address (pix + the window position's words + cw) is a register, moved on by one
        # of the sums below, each of two registers (pc is pix + cw), and each counter's "last"
        # flag is a register set a step early (:class:`LastFlag`): the banks' address and a
        # step's decisions leave flip-flops (with registered reads on a large ECP5, the sum
        # through the bank arbiter into every bank and the comparisons with the geometry
        # ahead of the decisions were long paths).
        addr = Signal.like(self.rd_addr, name="addr")
        pc = Signal.like(self.rd_addr, name="pix_cw")
        flag = {name: LastFlag(m, name, bound, load=self.start) for name, bound in
                (("wx", g.kw - 1), ("wy", g.kh - 1), ("cw", d.src_stride - 1),
                 ("ox", g.ow - 1), ("oy", g.oh - 1), ("img", self.last_row))}
        counters = {"wx": wx, "wy": wy, "cw": cw, "ox": ox, "oy": oy, "img": img}

        def restart(*names, at_load=False):
            for name in names:
                m.d.sync += counters[name].eq(0)
                flag[name].reset(m, at_load=at_load)

        def step(name):
            m.d.sync += counters[name].eq(counters[name] + 1)
            flag[name].step(m, counters[name])

        def move(pixel):
            m.d.sync += [pix.eq(pixel), pc.eq(pixel), addr.eq(pixel)]

        win_first = (wx == 0) & (wy == 0)
        win_last = flag["wx"].last & flag["wy"].last
        word_last = flag["cw"].last
        pixel_last = flag["ox"].last & flag["oy"].last & flag["img"].last
        m.d.comb += [self.rd_addr.eq(addr), self.rd_en.eq(active)]
        with m.If(self.start):
            m.d.sync += active.eq(0)
            restart(*counters, at_load=True)
            move(d.src_base)
        with m.Elif(self.go):
            m.d.sync += active.eq(1)
        with m.Elif(active):
            with m.If(~win_last):        # the next window position
                with m.If(~flag["wx"].last):
                    step("wx")
                    m.d.sync += addr.eq(addr + d.src_stride)
                with m.Else():
                    restart("wx")
                    step("wy")
                    m.d.sync += addr.eq(addr + g.ky_step)
            with m.Else():
                restart("wx", "wy")
                with m.If(~word_last):   # the pixel's next word
                    step("cw")
                    m.d.sync += [pc.eq(pc + 1), addr.eq(pc + 1)]
                with m.Else():           # the next output pixel
                    restart("cw")
                    with m.If(pixel_last):
                        m.d.sync += active.eq(0)
                        move(pix)
                    with m.Elif(~flag["ox"].last):
                        step("ox")
                        move(pix + g.col_step)
                    with m.Elif(~flag["oy"].last):
                        restart("ox")
                        step("oy")
                        move(pix + g.row_step)
                    with m.Else():
                        restart("ox", "oy")
                        step("img")
                        move(pix + g.img_step)
        # The words arrive `read_latency` cycles after their reads, with what they close.
        # `go` lasts two cycles (PRIME, PRIME2): a read in the second is not part of the walk.
        lat = self.read_latency
        words = self.rd_data
        if lat > 1:
            # Registered reads (a large ECP5): the words pass a register first, since the
            # banks' output registers lie across the die from the comparisons.
            words = Signal.like(self.rd_data, name="rd_data_q")
            m.d.sync += words.eq(self.rd_data)
            lat += 1
        walking = active & ~self.go
        got = delay(m, walking, lat, name="got")
        first = delay(m, win_first, lat, name="first")
        last = delay(m, walking & win_last, lat, name="last")
        end = delay(m, walking & win_last & word_last & pixel_last, lat, name="end")
        # The window's maximum goes to a register and is written from there a cycle later:
        # a read, a compare and a write in one cycle was the ECP5 devices' longest path.
        best = Signal(self.rd_data.shape(), name="best")
        larger = [self._larger(m, b, first, words[b], best[b]) for b in range(cfg.act_lanes)]
        with m.If(got):
            for b in range(cfg.act_lanes):
                m.d.sync += best[b].eq(larger[b])
        out = Signal.like(self.wr_addr, name="out")
        with m.If(self.start):
            m.d.sync += out.eq(d.dst_base)
        with m.Elif(self.wr_en):
            m.d.sync += out.eq(out + 1)
        m.d.sync += [self.wr_en.eq(last), self.done.eq(end)]
        m.d.comb += [self.wr_addr.eq(out), self.wr_data.eq(best)]
        return m

    def _larger(self, m, lane, first, value, best):
        """Lane ``lane``'s next maximum: ``value`` at a window's first word, else the larger
        of ``value`` and ``best`` (by :attr:`max_unit`, or as signed integers)."""
        if self.max_unit is None:
            return Mux(first | (value > best), value, best)
        m.submodules[f"max{lane}"] = unit = self.max_unit()
        if unit.latency:
            raise ValueError(f"Pooler: max_unit's latency is {unit.latency}; allowed: 0")
        # The value with itself at a window's first word: the unit's rules apply to it too.
        m.d.comb += [unit.a.as_value().eq(Mux(first, value, best)), unit.b.as_value().eq(value)]
        return unit.y.as_value()
