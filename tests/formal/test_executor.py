"""Proof: the frame engine writes memory only for a whole, valid WRITE frame, within its bounds.

:class:`~hwgen.link.frame.FrameEngine` is its two layers wired together, and so is the proof:

1. The frame layer (:class:`~hwgen.link.framing.FrameCodec`, tests/formal/test_framing.py):
   it hands on only a frame it took whole, its header, its payload in order, ``crc_ok``
   saying whether its CRCs are right, and then holds still until the response.
2. The command layer (:class:`~hwgen.link.executor.CommandExecutor` with its
   :class:`~hwgen.link.checks.RequestChecks` and COMMIT), here: fed any request as the frame
   layer hands them on (assumed: the guarantees of 1), it writes only while COMMIT carries out
   a request with ``crc_ok``, opcode WRITE, a length of the arguments plus ``count`` words of
   an existing region that fits its buffer, and ``addr + count`` within the region; the host
   port then shows that region and an address among the request's words.

Together: a write happens only for a frame with both CRCs right, opcode WRITE, a consistent
length and arguments inside a region, at the region and addresses it names. The two layers
are proved apart because a bounded check of both at once, from any byte sequence to the first
write, needs about 50 cycles of a design whose every byte may or may not arrive: hours for the
solver.

Both are bounded model checks from reset, for a small accelerator of narrow numbers
(``support.frame_proofs``: words of 1 to 4 bytes, the smallest payload buffer, 11 bytes):
frames of up to 3 payload bytes after any bytes, and WRITEs of up to 9 bytes. Not covered:
longer frames and WRITEs (the same counters and states; each byte more costs the solver
minutes), a later request (after a response, from a state that differs from reset by the
buffer's old bytes, which the length check keeps out of a WRITE's words, and the program
flag), the cycles of COMMIT after its first (each word takes 29 cycles, shifted through a
register as wide as a COUNTERS answer; the addresses follow from one counter set in
DISPATCH), LOAD (``Features.PACKED``). The wide COMMIT (``wide=True``, the stream link's: a
byte a cycle, each word written the cycle after its last byte) is proved through all its writes
of a WRITE of two 1-byte words. The simulation tests (tests/link) check them against
the model.
"""

import functools

import pytest
from amaranth.asserts import AnyConst
from amaranth.hdl import Assume, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from support.formal import Spec, any_inputs, assert_proved, assert_refuted
from support.frame_proofs import ARGS, CONFIG, ENGINE, MAX_PAYLOAD

from hwgen.link import commit as commit_module
from hwgen.link import executor as executor_module
from hwgen.link.checks import RequestChecks
from hwgen.link.executor import CommandExecutor
from hwgen.memmap import regions
from hwgen.protocol import CRC_BYTES, Features, Opcode, Status

pytestmark = pytest.mark.formal


class CommandLayerSpec(Spec):
    """Any request as the frame layer hands them on, any answers from the accelerator.

    Assumed (what tests/formal/test_framing.py proves of the frame layer): the request's
    header holds (any one header); payload bytes come in order from index 0, any number of
    them, and from 0 again (a frame dropped midway hands on some), the last at least two
    cycles before ``done`` (the payload CRC's bytes); ``done`` pulses at most once, and from
    then on no payload byte comes and ``crc_ok`` holds (until the response, which is not sent
    here: the frame layer takes the next request only after it). The spec keeps the byte last
    handed on at each argument index. Checked: ``host.we`` only in COMMIT; in COMMIT, the
    request has ``crc_ok``, opcode WRITE, a length of the arguments plus ``count`` words of
    the region its arguments name, ``addr + count`` within that region's depth, and the host
    port shows that region and an address from ``addr`` to ``addr + count - 1``. The state is
    read from the elaborated design, as Amaranth's simulator reads it (``find_generated``).
    """

    def elaborate(self, platform):
        m = Module()
        dut = self.dut
        fsm = self.fsm(self.add_design(m, platform))
        commit = fsm.state == fsm.encoding["COMMIT"]
        rq, rs, host = dut.request, dut.response, dut.host
        any_inputs(m, [host.rdata, host.rvalid, host.busy, host.cycles, host.busy_cycles,
                       host.macs, rq.payload.valid, rq.payload.payload, rq.index, rq.done,
                       rq.crc_ok, rs.last])
        m.d.comb += Value.cast(rq.header).eq(AnyConst(len(Value.cast(rq.header))))

        # `done` was seen before this cycle; and before the last one (crc_ok is valid from
        # the cycle after `done`, so it holds from the one after that).
        after_done, settled, crc_ok_before = Signal(), Signal(), Signal()
        with m.If(rq.done):
            m.d.sync += after_done.eq(1)
        m.d.sync += [settled.eq(after_done), crc_ok_before.eq(rq.crc_ok)]
        with m.If(after_done):
            m.d.comb += Assume(~rq.done & ~rq.payload.valid)
        with m.If(settled):
            m.d.comb += Assume(rq.crc_ok == crc_ok_before)
        # Payload bytes in order from index 0, or from 0 again (a new frame).
        next_index = Signal(16)
        with m.If(rq.payload.valid):
            m.d.sync += next_index.eq(rq.index + 1)
            m.d.comb += Assume((rq.index == next_index) | (rq.index == 0))
        # The payload CRC's two bytes come between the last payload byte and `done`.
        payload_before = Signal()
        m.d.sync += payload_before.eq(rq.payload.valid)
        with m.If(rq.done):
            m.d.comb += Assume(~rq.payload.valid & ~payload_before)

        handed = [Signal(8, name=f"handed{k}") for k in range(ARGS)]
        with m.If(rq.payload.valid):
            for k in range(ARGS):
                with m.If(rq.index == k):
                    m.d.sync += handed[k].eq(rq.payload.payload)

        with m.If(host.we):
            self.check(m, "writes_only_in_commit", commit)
        with m.If(commit):
            self.check(m, "commit_is_a_valid_write", rq.crc_ok
                       & (rq.header.opcode == Opcode.WRITE) & self.fits(rq.header, handed))
            self.check(m, "commit_in_its_region", self.in_its_region(host, handed))
        return m

    @staticmethod
    def fits(header, args):
        """Return whether a WRITE of ``header.length`` bytes with the arguments ``args`` (8-bit
        values) fits the buffer, names a region, and carries ``count`` words of it that lie
        inside it."""
        region_byte, addr, count = args[0], Cat(*args[1:5]), Cat(*args[5:7])
        fits = Const(0)
        for region, g in regions(CONFIG).items():
            fits |= ((region_byte == region.value) & (count != 0)
                     & (header.length == ARGS + count * g.word_bytes)
                     & (addr + count <= g.depth))
        return fits & (header.length <= MAX_PAYLOAD)

    @staticmethod
    def in_its_region(host, args):
        """Return whether the host port shows the region ``args`` name, at one of its words."""
        region_byte, addr, count = args[0], Cat(*args[1:5]), Cat(*args[5:7])
        return ((host.region.as_value() == region_byte)
                & (host.addr >= addr) & (host.addr < addr + count))


def executor(**options):
    return CommandExecutor(CONFIG, max_payload=MAX_PAYLOAD, features=Features.NONE, **options)


def command_depth(payload):
    """Cycles from reset to COMMIT for WRITEs of up to ``payload`` bytes: the payload, its
    CRC, the count of up to ``payload - ARGS`` words (a cycle each and one more), CHECK and
    DISPATCH."""
    return payload + CRC_BYTES + (payload - ARGS + 1) + 3


# The wide COMMIT (the stream link's: a byte a cycle, each word written the cycle after its
# last byte) writes its first word 2 cycles after entering COMMIT; 3 more cycles cover all of
# a WRITE of two 1-byte words.
WIDE_COMMIT_CYCLES = 3


# The wide COMMIT's proof through both words of a two-word WRITE takes the solver four minutes
# (the slow run); by default it covers every one-word WRITE through its write, and its seeded
# bug (below) shows the two-word case refuted at the full depth.
@pytest.mark.parametrize(("wide", "payload"), [
    (False, ARGS + 2), (True, ARGS + 1),
    pytest.param(True, ARGS + 2, marks=pytest.mark.slow)], ids=["serial", "wide", "wide-2"])
def test_command_layer(tmp_path, wide, payload):
    """BMC from reset to the first cycle of COMMIT (wide: to its last write) for every WRITE of
    up to ``payload`` bytes (9: WEIGHT, ACT (one or two words) and OUTPUT (one word)). PARAM
    and PROGRAM words (3 and 4 bytes) go through the same states and the same count, one
    addition a word; the solver needs minutes a byte beyond these."""
    depth = command_depth(payload) + (WIDE_COMMIT_CYCLES if wide else 0)
    assert_proved(CommandLayerSpec(executor(wide=wide)), tmp_path, depth=depth, engine=ENGINE)


class LetsThrough(wiring.Component):
    """Seeded bug: request checks that answer OK where the real ones answer ``status`` (the
    real :class:`~hwgen.link.checks.RequestChecks` inside, its verdict overridden)."""

    def __init__(self, config, *, max_payload, features, status):
        self.checks = RequestChecks(config, max_payload=max_payload, features=features)
        self.lets_through = status
        super().__init__(self.checks.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.checks = inner = self.checks
        for name, member in self.signature.members.items():
            ours, theirs = getattr(self, name), getattr(inner, name)
            if name == "status":
                m.d.comb += ours.eq(Mux(theirs == self.lets_through, Status.OK, theirs))
            elif member.flow == wiring.In:
                m.d.comb += theirs.eq(ours)
            else:
                m.d.comb += ours.eq(theirs)
        return m


class ReadTakenForWrite(wiring.Component):
    """Seeded bug: a command layer that decodes READ as WRITE (the real
    :class:`~hwgen.link.executor.CommandExecutor` inside, fed a changed opcode)."""

    def __init__(self):
        self.executor = executor()
        super().__init__(self.executor.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.executor = inner = self.executor
        wiring.connect(m, wiring.flipped(self.request), inner.request)
        wiring.connect(m, wiring.flipped(self.response), inner.response)
        wiring.connect(m, wiring.flipped(self.host), inner.host)
        opcode = self.request.header.opcode
        m.d.comb += inner.request.header.opcode.eq(
            Mux(opcode == Opcode.READ, Opcode.WRITE, opcode))
        return m


@pytest.mark.parametrize(("bug", "broken"), [
    (Status.BAD_CRC, "commit_is_a_valid_write"),
    (Status.BAD_LENGTH, "commit_is_a_valid_write"),
    (Status.BAD_REGION, "commit_is_a_valid_write"),
    (Status.BAD_ADDRESS, "commit_is_a_valid_write"),
    (Opcode.READ, "commit_is_a_valid_write"),
])
def test_command_layer_seeded_bug_is_caught(tmp_path, monkeypatch, bug, broken):
    """A command layer that skips one check (its status taken for OK), or takes a READ for a
    WRITE, commits a write the proof refuses."""
    if bug is Opcode.READ:
        spec = CommandLayerSpec(ReadTakenForWrite(), fsm_path=("executor", "fsm"))
    else:
        monkeypatch.setattr(executor_module, "RequestChecks",
                            functools.partial(LetsThrough, status=bug))
        spec = CommandLayerSpec(executor())
    assert_refuted(spec, tmp_path, depth=command_depth(ARGS + 2), engine=ENGINE, expect=broken)


def test_wide_commit_seeded_bug_is_caught(tmp_path, monkeypatch):
    """A wide COMMIT that moves on two addresses after each word written puts a WRITE's second
    word outside the request's words: the proof refuses it."""
    write_pending = commit_module.write_pending

    def skips_a_word(m, host, dp, *, handshake):
        hold, written = write_pending(m, host, dp, handshake=handshake)
        with m.If(written):
            m.d.sync += dp.mem_addr.eq(dp.mem_addr + 2)
        return hold, written

    monkeypatch.setattr(commit_module, "write_pending", skips_a_word)
    assert_refuted(CommandLayerSpec(executor(wide=True)), tmp_path,
                   depth=command_depth(ARGS + 2) + WIDE_COMMIT_CYCLES, engine=ENGINE,
                   expect="commit_in_its_region")
