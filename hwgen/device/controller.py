"""The controller: runs a program of layer descriptors, one layer (and chunk) after another."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..memmap import batch_bits, descriptor_layout, geometry_layout, geometry_words

__all__ = ["GEOM_CYCLES", "Controller", "geometry_lead"]

#: Cycles GEOM takes per geometry word: a layer's LOAD comes ``GEOM_CYCLES * words`` cycles
#: after its DECODE, which the cycle model counts (:mod:`hwgen.cycles`).
GEOM_CYCLES = 3


def geometry_lead(config):
    """Return how many cycles before a spatial layer's ``start_layer`` (LOAD) its descriptor
    and geometry are whole (:class:`Controller`): GEOM reads a word every two cycles, so the
    last arrives ``words - 1`` cycles before its three cycles a word end (0 on a design of one
    geometry word, or without spatial layers)."""
    if not config.spatial:
        return 0
    count = geometry_words(config)
    return GEOM_CYCLES * count - (2 * count + 1)


class Controller(wiring.Component):
    """Fetch each layer's descriptor (and a spatial layer's geometry) from the program memory
    and run the layer, chunk by chunk.

    ``start`` (while idle) raises ``busy`` and takes the run's ``batch``. For each layer the
    controller reads the descriptor (FETCH, DECODE: into ``desc``), a spatial layer's geometry
    words (GEOM, three cycles each, a word read every two of them so that the geometry is
    whole :func:`geometry_lead` cycles before LOAD; a plain matrix layer's geometry is that of
    1x1 images),
    pulses ``start_layer`` (LOAD) and ``prime`` (two cycles, PRIME and PRIME2), then waits for
    ``layer_done`` (RUN).
    When the feeder says that pixels remain (``more_chunks``) it runs the layer's next chunk:
    ``start_chunk`` (NEXT), ``prime``, RUN again. The layer marked ``last`` ends the run.

    Parameters
    ----------
    config : AcceleratorConfig
    registered_bounds : bool
        Keep the loop bounds (``k_end``, ``n_end``, ``last_row``) in registers, set once per run
        or layer, instead of subtracting them every cycle: they feed the enables of many
        counters (an implementation's ``post_pipeline``).

    Members
    -------
    start : In(1)
    batch_in : In(batch_bits(config))
        The host port's run request.
    busy : Out(1)
    prog_addr : Out(range(config.prog_depth))
        The program memory's address while busy.
    prog_data : In(unsigned(descriptor width))
        The word read at ``prog_addr`` one cycle (plain reads) or two (registered) after it
        is addressed.
    desc : Out(descriptor_layout(config))
    geom : Out(geometry_layout(config))
        The running layer's descriptor and geometry (from LOAD on; a spatial layer's from
        :func:`geometry_lead` cycles before it, so that a unit may register what it computes
        from them for LOAD). Without spatial layers
        (``config.spatial`` False) every layer is a plain one, whose geometry is made from its
        descriptor (no registers of its own).
    kind_next : Out(the descriptor's kind)
        ``desc.kind``'s next value (the word's in DECODE), so that a decode of the kind can be
        a register.
    start_layer, start_chunk, prime : Out(1)
        Registers: high in LOAD, NEXT, and PRIME and PRIME2.
    start_layer_next, start_chunk_next : Out(1)
        ``start_layer`` and ``start_chunk`` of the next cycle, so that a unit's starts can be
        registers of its own.
    prime_next : Out(1)
        ``prime`` of the next cycle (LOAD, PRIME or NEXT), so that a unit's start can be a
        register of its own (``prime`` and its grant, without a gate after them).
    layer_done : In(1)
        The running chunk's last result is written.
    more_chunks : In(1)
        Pixels of the layer remain after the running chunk.
    batch, last_row : Out(batch_bits(config))
        Images of the run, and ``batch - 1``.
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
            "prog_data": In(unsigned(layout.size)),
            "desc": Out(layout),
            "kind_next": Out(layout.members["kind"]),
            "geom": Out(geometry_layout(config)),
            "start_layer": Out(1),
            "start_layer_next": Out(1),
            "start_chunk": Out(1),
            "start_chunk_next": Out(1),
            "prime": Out(1),
            "prime_next": Out(1),
            "layer_done": In(1),
            "more_chunks": In(1),
            "batch": Out(batch),
            "last_row": Out(batch),
            "k_end": Out(layout.members["k_tiles"]),
            "n_end": Out(layout.members["n_tiles"]),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        desc, geom = self.desc, self.geom
        pc = self.prog_addr     # the next word
        word = descriptor_layout(cfg)(self.prog_data)
        width = len(self.prog_data)
        count = geometry_words(cfg)
        # A matrix layer over rows: 1x1 images and kernel, a row's words per image.
        plain = geometry_layout(cfg).const({
            "h": 1, "w": 1, "oh": 1, "ow": 1, "kh": 1, "kw": 1, "sy": 1, "sx": 1})
        if cfg.spatial:
            g_cycle = Signal(range(GEOM_CYCLES * count))    # GEOM's cycle
            g_bits = Signal(count * width)
            g_view = geometry_layout(cfg)(g_bits[:len(geom.as_value())])
            m.d.comb += geom.eq(g_view)
        else:
            # Every layer is plain: its geometry follows from the descriptor.
            m.d.comb += [geom.eq(plain), geom.cgs.eq(desc.k_tiles),
                         geom.img_step.eq(desc.src_stride)]
        m.d.sync += [self.start_layer.eq(self.start_layer_next),
                     self.start_chunk.eq(self.start_chunk_next),
                     self.prime.eq(self.prime_next)]
        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.sync += pc.eq(0)
                with m.If(self.start):
                    m.d.sync += [self.busy.eq(1), self.batch.eq(self.batch_in)]
                    m.next = "FETCH"
            with m.State("FETCH"):
                m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += [desc.eq(word), pc.eq(pc + 1)]
                if cfg.spatial:
                    m.d.sync += g_cycle.eq(0)
                    with m.If(word.spatial):
                        m.next = "GEOM"
                    with m.Else():
                        m.d.sync += [g_bits.eq(plain.as_value()), g_view.cgs.eq(word.k_tiles),
                                     g_view.img_step.eq(word.src_stride)]
                        m.d.comb += self.start_layer_next.eq(1)
                        m.next = "LOAD"
                else:
                    m.d.comb += self.start_layer_next.eq(1)
                    m.next = "LOAD"
            if cfg.spatial:
                with m.State("GEOM"):
                    # Word i is addressed in cycles 2i and 2i + 1 and taken in cycle 2i + 2:
                    # the word addressed one (plain reads) or two (registered) cycles before.
                    # LOAD keeps its cycle, GEOM_CYCLES a word after DECODE.
                    m.d.sync += g_cycle.eq(g_cycle + 1)
                    with m.If(g_cycle[0] & (g_cycle < 2 * count)):
                        m.d.sync += pc.eq(pc + 1)
                    for i in range(count):
                        with m.If(g_cycle == 2 * i + 2):
                            m.d.sync += g_bits.word_select(i, width).eq(self.prog_data)
                    with m.If(g_cycle == GEOM_CYCLES * count - 1):
                        m.d.comb += self.start_layer_next.eq(1)
                        m.next = "LOAD"
            with m.State("LOAD"):
                m.next = "PRIME"
            with m.State("PRIME"):
                # Two cycles: the patch walker's look-ahead fills its two stages.
                m.next = "PRIME2"
            with m.State("PRIME2"):
                m.next = "RUN"
            with m.State("RUN"), m.If(self.layer_done):
                with m.If(self.more_chunks):
                    m.d.comb += self.start_chunk_next.eq(1)
                    m.next = "NEXT"
                with m.Elif(desc.last):
                    m.d.sync += self.busy.eq(0)
                    m.next = "IDLE"
                with m.Else():
                    m.next = "FETCH"
            with m.State("NEXT"):
                m.next = "PRIME"
        m.d.comb += [self.prime_next.eq(fsm.ongoing("LOAD") | fsm.ongoing("PRIME")
                                        | fsm.ongoing("NEXT")),
                     self.kind_next.eq(Mux(fsm.ongoing("DECODE"), word.kind, desc.kind))]

        if self.registered_bounds:
            k_last = Signal.like(self.k_end, name="k_last")
            n_last = Signal.like(self.n_end, name="n_last")
            m.d.sync += self.last_row.eq(self.batch - 1)   # valid from FETCH on
            with m.If(self.start_layer):
                m.d.sync += [k_last.eq(desc.k_tiles - 1), n_last.eq(desc.n_tiles - 1)]
            m.d.comb += [self.k_end.eq(k_last), self.n_end.eq(n_last)]
        else:
            m.d.comb += [self.last_row.eq(self.batch - 1),
                         self.k_end.eq(desc.k_tiles - 1), self.n_end.eq(desc.n_tiles - 1)]
        return m
