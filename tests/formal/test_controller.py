"""Proof: a pass never starts before its descriptor and geometry are whole.

For any program in the program memory, any batch and any timing of the units' answers
(``layer_done``, ``more_chunks``), :class:`~hwgen.device.controller.Controller` raises
``start_layer`` only with ``desc`` equal to the layer's descriptor word and ``geom`` equal to
its geometry (a spatial layer's geometry words, a plain layer's 1x1 geometry); a spatial
layer's ``geom`` has held that value for :func:`~hwgen.device.controller.geometry_lead` cycles
before (units register what they compute from it), and each chunk (``start_chunk``) starts
with the same descriptor and geometry. The program memory answers one cycle after the address
(plain reads) or two (registered reads), as the controller allows.
"""

import pytest
from amaranth.asserts import AnyConst
from amaranth.hdl import Array, Cat, Module, Mux, Signal, Value
from support.formal import Spec, any_inputs, assert_proved, assert_refuted

from hwgen.config import AcceleratorConfig
from hwgen.device import controller as controller_module
from hwgen.device.controller import Controller, geometry_lead
from hwgen.memmap import descriptor_layout, geometry_layout, geometry_words

pytestmark = pytest.mark.formal

# The smallest spatial design: two geometry words, one cycle of lead; room for two spatial
# layers (a power of two, so that the program counter wraps as the spec's address does).
CONFIG = AcceleratorConfig(rows=1, cols=1, max_k=4, act_depth=16, weight_depth=16,
                           param_depth=2, acc_depth=2, out_depth=16, prog_depth=8)


class ControllerSpec(Spec):
    """Any program (one value per word for the whole run), any start, batch, ``layer_done``
    and ``more_chunks`` in every cycle; assumes nothing else.

    The program memory is wired as the accelerator wires it (``share_read``): it reads the
    controller's address while busy and word 0 while idle (the host reads nothing as a run
    starts). The spec follows the program by itself: the first layer's descriptor is word 0,
    and each layer's next is right after it, or after its geometry words if its ``spatial``
    flag is set.

    Besides the properties at ``start_layer`` and ``start_chunk``, the spec states in which
    state the controller addresses which word and holds which descriptor and geometry: they
    are what makes the proof inductive (k-induction starts from any state that satisfies
    them for k cycles). The state is read from the elaborated design, as Amaranth's simulator
    reads it (``find_generated``).
    """

    def __init__(self, controller, *, read_latency):
        super().__init__(controller)
        self.read_latency = read_latency

    def elaborate(self, platform):
        m = Module()
        dut = self.dut
        fsm = self.fsm(self.add_design(m, platform))
        state = {name: fsm.state == value for name, value in fsm.encoding.items()}
        cfg = dut.config
        layout = descriptor_layout(cfg)
        width, count = layout.size, geometry_words(cfg)
        program = Array(AnyConst(width) for _ in range(cfg.prog_depth))
        any_inputs(m, [dut.start, dut.batch_in, dut.layer_done, dut.more_chunks])
        data = program[Mux(dut.busy, dut.prog_addr, 0)]
        for stage in range(self.read_latency):
            registered = Signal(width, name=f"read{stage}")
            m.d.sync += registered.eq(data)
            data = registered
        m.d.comb += dut.prog_data.eq(data)

        # `here`: the running layer's first word; `there`: the next layer's.
        here, there = Signal.like(dut.prog_addr), Signal.like(dut.prog_addr)
        next_word = layout(program[there])
        after = (there + 1 + Mux(next_word.spatial, count, 0))[:len(there)]   # wraps as pc
        with m.If(~dut.busy):
            m.d.sync += there.eq(0)
        with m.Elif(dut.start_layer):
            m.d.sync += [here.eq(there), there.eq(after)]

        # The geometry one cycle ago, ..., `lead` cycles ago.
        geom = Value.cast(dut.geom)
        past = [geom]
        for k in range(geometry_lead(cfg)):
            before = Signal.like(geom, name=f"geom_{k + 1}_ago")
            m.d.sync += before.eq(past[-1])
            past.append(before)

        desc = Value.cast(dut.desc)
        with m.If(dut.start_layer):
            self.check(m, "layer_starts_with_its_descriptor", desc == program[there])
            self.check(m, "layer_starts_with_its_geometry",
                       geom == self.geometry(m, program, there))
            with m.If(next_word.spatial):
                for before in past[1:]:
                    self.check(m, "spatial_geometry_whole_lead_cycles_before", before == geom)
        with m.If(dut.start_chunk):
            self.check(m, "chunk_starts_with_its_descriptor", desc == program[here])
            self.check(m, "chunk_starts_with_its_geometry",
                       geom == self.geometry(m, program, here))

        # Where the controller is, state by state.
        self.check(m, "state_is_a_state", fsm.state < len(fsm.encoding))
        self.check(m, "busy_unless_idle", dut.busy == ~state["IDLE"])
        self.check(m, "start_layer_in_load", dut.start_layer == state["LOAD"])
        self.check(m, "start_chunk_in_next", dut.start_chunk == state["NEXT"])
        with m.If(state["FETCH"] | state["DECODE"]):
            self.check(m, "fetches_the_next_layer", dut.prog_addr == there)
        with m.If(state["LOAD"]):
            self.check(m, "loads_past_the_layer", dut.prog_addr == after)
        running = state["PRIME"] | state["PRIME2"] | state["RUN"] | state["NEXT"]
        with m.If(running):
            self.check(m, "runs_the_layer", (dut.prog_addr == there) & (desc == program[here])
                       & (geom == self.geometry(m, program, here)))
        return m

    def geometry(self, m, program, at):
        """Return the geometry of the layer whose descriptor is word ``at``: the words after
        it (spatial), or 1x1 images over ``k_tiles`` channel groups (plain) as the layouts
        document it (``support.plain_geometry``)."""
        cfg = self.dut.config
        glayout = geometry_layout(cfg)
        desc = descriptor_layout(cfg)(program[at])
        words = Cat(*(program[(at + 1 + i)[:len(at)]] for i in range(geometry_words(cfg))))
        plain = Signal(glayout)
        m.d.comb += [getattr(plain, name).eq(1)
                     for name in ("h", "w", "oh", "ow", "kh", "kw", "sy", "sx")]
        m.d.comb += [plain.cgs.eq(desc.k_tiles), plain.img_step.eq(desc.src_stride)]
        return Mux(desc.spatial, words[:glayout.size], Value.cast(plain))


# k-induction's k: longer than a layer's FETCH, DECODE and GEOM, so that the cycles before a
# LOAD start at a FETCH, where the properties above pin the controller down.
DEPTH = 3 * geometry_words(CONFIG) + 6


@pytest.mark.parametrize("read_latency", [1, 2])
def test_pass_starts_with_whole_geometry(tmp_path, read_latency):
    """k-induction: in every reachable state of every run, however long, for the smallest
    spatial design (two geometry words, a lead of one cycle). A design with more geometry
    words repeats GEOM's three cycles per word and has a longer lead (geometry_lead); its
    proof needs a k longer by three cycles a word."""
    spec = ControllerSpec(Controller(CONFIG), read_latency=read_latency)
    assert_proved(spec, tmp_path, depth=DEPTH, mode="prove")


def test_seeded_bug_is_caught(tmp_path, monkeypatch):
    """A controller that spends two cycles instead of three on each geometry word starts the
    layer before the last word has arrived."""
    monkeypatch.setattr(controller_module, "GEOM_CYCLES", 2)
    spec = ControllerSpec(Controller(CONFIG), read_latency=2)
    assert_refuted(spec, tmp_path, depth=DEPTH, mode="prove",
                   expect="layer_starts_with_its_geometry")
