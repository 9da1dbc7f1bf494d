"""The controller: runs a program of layer descriptors, one layer after the other."""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..memmap import batch_bits, descriptor_layout

__all__ = ["Controller"]


class Controller(wiring.Component):
    """Fetch each layer's descriptor from the program memory and hand it to the datapath.

    ``start`` (while idle) raises ``busy`` and takes the run's ``batch``. For each layer the
    controller reads the next descriptor (FETCH), pulses ``start_layer`` while ``next_desc``
    holds it (DECODE), then holds it in ``desc`` until ``layer_done`` (RUN). The layer marked
    ``last`` ends the run and lowers ``busy``.

    Parameters
    ----------
    config : AcceleratorConfig
    registered_bounds : bool
        Keep the loop bounds (``last_row``, ``k_end``, ``n_end``...) in registers, set once per
        run or layer, instead of subtracting them every cycle: they feed the enables of many
        counters (an implementation's ``post_pipeline``).

    Members
    -------
    start : In(1)
    batch_in : In(batch_bits(config))
        The host port's run request.
    busy : Out(1)
    prog_addr : Out(range(config.prog_depth))
        The program memory's address while busy (the next descriptor's word).
    prog_data : In(descriptor_layout(config))
        The word read at ``prog_addr`` (the cycle after it is addressed).
    start_layer : Out(1)
        A layer starts: ``next_desc`` is its descriptor (a register: high in DECODE).
    next_desc, desc : Out(descriptor_layout(config))
        The descriptor being loaded, and the running layer's (valid the cycle after DECODE).
    layer_done : In(1)
        The running layer's last result is written.
    batch : Out(batch_bits(config))
        Rows of the run.
    last_row, before_last_row : Out(batch_bits(config))
        ``batch - 1`` and ``batch - 2``.
    k_end, n_end : Out
        The running layer's last reduction and output tile: ``desc.k_tiles - 1``,
        ``desc.n_tiles - 1``.
    """

    def __init__(self, config, *, registered_bounds=False):
        self.config = config
        self.registered_bounds = registered_bounds
        layout = descriptor_layout(config)
        batch = unsigned(batch_bits(config))
        super().__init__({
            "start": In(1),
            "batch_in": In(batch),
            "busy": Out(1),
            "prog_addr": Out(range(config.prog_depth)),
            "prog_data": In(layout),
            "start_layer": Out(1),
            "next_desc": Out(layout),
            "desc": Out(layout),
            "layer_done": In(1),
            "batch": Out(batch),
            "last_row": Out(batch),
            "before_last_row": Out(batch),
            "k_end": Out(layout.members["k_tiles"]),
            "n_end": Out(layout.members["n_tiles"]),
        })

    def elaborate(self, platform):
        m = Module()
        desc = self.desc
        pc = self.prog_addr     # the next descriptor's word
        m.d.comb += self.next_desc.eq(self.prog_data)
        m.d.sync += self.start_layer.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                m.d.sync += pc.eq(0)
                with m.If(self.start):
                    m.d.sync += [self.busy.eq(1), self.batch.eq(self.batch_in)]
                    m.next = "FETCH"
            with m.State("FETCH"):
                # FETCH always leads to DECODE: `start_layer` is a register, not a decode of
                # the state, for the activation banks' addresses that it chooses.
                m.d.sync += self.start_layer.eq(1)
                m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += [desc.eq(self.next_desc), pc.eq(pc + 1)]
                m.next = "RUN"
            with m.State("RUN"), m.If(self.layer_done):
                with m.If(desc.last):
                    m.d.sync += self.busy.eq(0)
                    m.next = "IDLE"
                with m.Else():
                    m.next = "FETCH"

        if self.registered_bounds:
            k_last = Signal.like(self.k_end, name="k_last")
            n_last = Signal.like(self.n_end, name="n_last")
            m.d.sync += [self.last_row.eq(self.batch - 1),   # valid from FETCH on
                         self.before_last_row.eq(self.batch - 2)]
            with m.If(self.start_layer):
                m.d.sync += [k_last.eq(self.next_desc.k_tiles - 1),
                             n_last.eq(self.next_desc.n_tiles - 1)]
            m.d.comb += [self.k_end.eq(k_last), self.n_end.eq(n_last)]
        else:
            m.d.comb += [self.last_row.eq(self.batch - 1),
                         self.before_last_row.eq(self.batch - 2),
                         self.k_end.eq(desc.k_tiles - 1), self.n_end.eq(desc.n_tiles - 1)]
        return m
