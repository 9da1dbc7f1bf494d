"""The activation feeder: streams a layer's rows to the engine, read across the activation
banks at the addresses the patch walker gives."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..implementation import Implementation, Registers
from ..memmap import (
    act_addr_bits,
    batch_bits,
    descriptor_layout,
    feeder_rotates,
    geometry_layout,
)
from .engine import act_row_layout
from .memories import read_latency
from .patch_walker import PatchWalker
from .skid import Skid

__all__ = ["ActivationFeeder"]


class ActivationFeeder(wiring.Component):
    """Read each row of a layer's walk (:class:`~hwgen.device.patch_walker.PatchWalker`) from
    the activation banks and stream it to the engine.

    A row's ``rows`` elements span the banks from any lane: every bank reads its own word and
    the lanes are rotated into place. Words outside the row's pixel (or a pixel outside the
    image) are not read and feed zeros. ``last`` ends each pass over a chunk.

    Parameters
    ----------
    config : AcceleratorConfig
        With ``requant_steps > 1`` the rows of a requantized layer's last reduction tile enter
        the engine ``requant_steps`` cycles apart, as fast as the requantization takes them.
    implementation : Implementation or None
        Its registers set the walker's stages (:meth:`walk_stages_for`): with registered reads
        the banks' words pass registers, the walker addresses them a cycle ahead, from
        registers, and a :class:`~hwgen.device.skid.Skid` lets the feeder move on without
        waiting for the engine's ``ready`` (one requantization step only); from
        ``Registers.ARRAY`` on, with the skid, the walker's rows pass a register more, a cycle
        per chunk (:meth:`first_row_for`). None: the plain one.

    Members
    -------
    start_layer, begin_chunk, prime : In(1)
        From the controller: a layer's first chunk is loaded; a chunk is loaded (high with
        ``start_layer`` too: the controller's ``start_layer`` or ``start_chunk``); two cycles
        of ``prime`` bring its first row.
    prime_next : In(1)
        With registered reads: ``prime`` of the next cycle (a register), so that the walker's
        step is one too.
    desc : In(descriptor_layout(config))
    geom : In(geometry_layout(config))
    last_row : In(batch_bits(config))
    more_chunks : Out(1)
        Pixels remain after the current chunk.
    rd_addr : Out(ArrayLayout(unsigned, act_lanes))
    rd_en : Out(act_lanes)
        Each bank's read: its address and whether to read it (plain reads), or its address a
        cycle ahead and whether to read it then (registered reads).
    rd_take : Out(1)
        Registered reads: the banks' registers take the words.
    rd_data : In(ArrayLayout(signed(in_bits), act_lanes))
        The banks' words.
    o_act : Out(stream.Signature(act_row_layout(config)))
        To the engine's ``i_act``.
    """

    @staticmethod
    def walk_stages_for(config, implementation):
        """Return the stages of the feeder's walker (:class:`PatchWalker`'s ``stages``) on a
        device built with ``implementation``: none with plain reads; with registered reads
        (:func:`~hwgen.device.memories.read_latency` two) the look-ahead, its step from a
        register where a skid takes the rows (one requantization step), its rows staged too
        from ``Registers.ARRAY`` on."""
        if read_latency(implementation) == 1:
            return PatchWalker.PLAIN
        if config.requant_steps > 1:
            return PatchWalker.LOOKAHEAD
        if implementation.registers >= Registers.ARRAY:
            return PatchWalker.STAGED_ROWS
        return PatchWalker.REGISTERED_STEP

    @classmethod
    def first_row_for(cls, config, implementation):
        """Return the cycles the feeder adds before a chunk's first row on a device built with
        ``implementation`` (one with staged rows, which :mod:`hwgen.cycles` counts)."""
        return int(cls.walk_stages_for(config, implementation) == PatchWalker.STAGED_ROWS)

    def __init__(self, config, implementation=None):
        implementation = Implementation() if implementation is None else implementation
        self.config = config
        stages = self.walk_stages_for(config, implementation)
        self.registered_reads = stages >= PatchWalker.LOOKAHEAD
        # With the skid (REGISTERED_STEP on), `take` is a register whose next value the skid
        # gives.
        self.walker = PatchWalker(config, stages=stages)
        lanes = config.act_lanes
        super().__init__({
            "start_layer": In(1),
            "begin_chunk": In(1),
            "prime": In(1),
            "desc": In(descriptor_layout(config)),
            "geom": In(geometry_layout(config)),
            "last_row": In(batch_bits(config)),
            "more_chunks": Out(1),
            "rd_addr": Out(data.ArrayLayout(unsigned(act_addr_bits(config)), lanes)),
            "rd_en": Out(lanes),
            "rd_take": Out(1),
            "rd_data": In(data.ArrayLayout(signed(config.in_bits), lanes)),
            "o_act": Out(stream.Signature(act_row_layout(config))),
            **({"prime_next": In(1)} if self.registered_reads else {}),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        rows, lanes = cfg.rows, cfg.act_lanes
        m.submodules.walker = walker = self.walker
        m.d.comb += [walker.start_layer.eq(self.start_layer),
                     walker.begin_chunk.eq(self.begin_chunk), walker.prime.eq(self.prime),
                     walker.desc.eq(self.desc), walker.geom.eq(self.geom),
                     walker.last_row.eq(self.last_row), self.more_chunks.eq(walker.more_chunks),
                     self.rd_addr.eq(walker.rd_addr), self.rd_en.eq(walker.rd_en)]
        cur = walker.cur
        valid = Signal()     # the row in `feed` is the layer's
        last = Signal()
        rem_q = Signal.like(cur.krem)
        inrow_q = Signal(lanes)
        take = Signal()
        o = self.o_act
        feed = Signal(o.payload.shape(), name="feed")   # the row in `valid`
        steps = cfg.requant_steps
        if self.walker.registered_step:
            m.submodules.skid = skid = Skid(o.payload.shape())
            m.d.comb += [skid.valid.eq(valid), skid.payload.eq(feed), take.eq(skid.take),
                         walker.prime_next.eq(self.prime_next),
                         walker.take_next.eq(skid.take_next)]
            wiring.connect(m, skid.o, wiring.flipped(o))
        elif steps == 1:
            m.d.comb += [take.eq(~valid | o.ready), o.valid.eq(valid), o.payload.eq(feed)]
        else:
            m.d.comb += o.payload.eq(feed)
            # Rows whose results are requantized enter `steps` cycles apart: the requantization
            # takes that long per row (it has `requant_lanes` of the `cols` lanes).
            final = Signal()    # the row in `valid` is of a requantized last k-tile
            gap = Signal(range(steps))
            gate = gap == 0
            m.d.comb += [take.eq(~valid | (o.ready & gate)), o.valid.eq(valid & gate)]
            with m.If(valid & gate & o.ready & final):
                m.d.sync += gap.eq(steps - 1)
            with m.Elif(~gate):
                m.d.sync += gap.eq(gap - 1)
            with m.If(take):
                m.d.sync += final.eq(cur.valid & ~self.desc.raw & cur.final)
        m.d.comb += [walker.take.eq(take), self.rd_take.eq(take)]
        with m.If(take):
            m.d.sync += [valid.eq(cur.valid), last.eq(cur.last), rem_q.eq(cur.krem),
                         inrow_q.eq(cur.inrow)]
        lane_data = [Mux(inrow_q[b], self.rd_data[b], 0) for b in range(lanes)]
        if feeder_rotates(cfg):
            # Rotate so that engine lane i is element k0 + i (a row starts in any bank; see
            # hwgen.memmap.feeder_rotates).
            for i in range(rows):
                with m.Switch(rem_q):
                    for r in range(lanes):
                        with m.Case(r):
                            m.d.comb += feed.data[i].eq(lane_data[(r + i) % lanes])
        else:
            for i in range(rows):
                m.d.comb += feed.data[i].eq(lane_data[i])
        m.d.comb += feed.last.eq(last)
        return m
