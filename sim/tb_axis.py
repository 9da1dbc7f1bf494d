"""cocotb test bench of the AXI4-Stream top (``hwgen.bus.axis.AxisTop``) with cocotbext-axi's
``AxiStreamSource`` and ``AxiStreamSink``.

The real host driver (:class:`host.Accelerator`) runs in a thread bridged into the simulation
(``cocotb.task.bridge``); its transport sends each request through the source and takes the
responses from the sink, one AXI packet per response frame (so ``tlast`` is checked on every
frame). Random networks are loaded and run, bit-exact with :class:`hwgen.nn.QuantizedNetwork`,
with random ``tvalid`` gaps and ``tready`` stalls. Without them, the sustained byte rate of a
long WRITE request (in) and a long READ response (out) is measured.

Environment: ``HWGEN_CONFIG``, ``HWGEN_SEED``, ``HWGEN_NETWORKS``, ``HWGEN_RATES`` (a JSON file
the measured rates are written to, if set).
"""

import itertools
import json
import os
import random

import cocotb
import numpy as np
from cocotb.task import bridge, resume
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamSink, AxiStreamSource

from host import Accelerator
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    CRC_BYTES,
    HEADER_BYTES,
    MAX_PAYLOAD,
    Opcode,
    encode_request,
    pack_access,
    pack_words,
    write_chunk_words,
)
from sim.cases import fitting_case, output_mismatch
from sim.runner import read_config_env
from sim.streams import Clocked

# Cycles a read waits for a first byte before it returns none (the host then asks again).
_READ_WAIT = 4096


class AxisTransport:
    """A :class:`host.transport.Transport` whose bytes go through the AXI4-Stream ports.

    Each response must arrive as one AXI packet (``tlast`` on its last byte) of exactly the
    frame's length. Methods are called from the host driver's bridged thread.
    """

    synchronous = True      # reads wait in simulated time: the driver may poll at once
    url = "axis://cocotb"
    timeout = None

    def __init__(self, dut):
        self.dut = dut
        # Defined inputs from time 0 (Icarus starts them at X, which the engine's ready sees).
        for name in ("s_axis__tdata", "s_axis__tvalid", "s_axis__tlast", "m_axis__tready"):
            getattr(dut, name).value = 0
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_"), dut.clk,
                                      dut.rst)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_"), dut.clk, dut.rst)
        self.buffer = bytearray()
        self.frames = 0

    def pauses(self, seed):
        """Random ``tvalid`` gaps on the requests and ``tready`` stalls on the responses."""
        rng = random.Random(seed)
        self.source.set_pause_generator(rng.random() < 0.3 for _ in itertools.count())
        self.sink.set_pause_generator(rng.random() < 0.4 for _ in itertools.count())

    def write(self, data):
        self._send(bytes(data))

    def read(self, size=1):
        return self._receive(size)

    @resume
    async def _send(self, data):
        await self.source.send(data)

    @resume
    async def _receive(self, size):
        for _ in range(_READ_WAIT // 8):
            while not self.sink.empty():
                frame = bytes(self.sink.recv_nowait().tdata)
                self._check_frame(frame)
                self.buffer += frame
            if self.buffer:
                break
            await ClockCycles(self.dut.clk, 8)
        out = bytes(self.buffer[:size])
        del self.buffer[:size]
        return out

    def _check_frame(self, frame):
        length = int.from_bytes(frame[4:6], "little") if len(frame) >= 6 else -1
        want = HEADER_BYTES + CRC_BYTES + length + CRC_BYTES
        assert len(frame) == want, (
            f"an AXI packet of {len(frame)} bytes is not one response frame ({want} bytes): "
            f"tlast is misplaced")
        self.frames += 1


async def _start(dut):
    """Make the AXI4-Stream ports, then reset the design; return the transport."""
    link = AxisTransport(dut)
    if "icarus" in cocotb.SIM_NAME.lower():
        # Icarus never evaluates a combinational block whose inputs do not change after time 0
        # (Yosys's initial trigger is set before the block waits): the frame engine's `ready`,
        # a function of its state alone, stays X. A change of the state during reset (the
        # reset puts it back) makes the block evaluate once.
        dut.device.frame.codec.fsm_state.value = 1
    await Clocked(dut).start()
    return link


@cocotb.test()
async def test_infer_through_the_host_driver(dut):
    """host.Accelerator loads and runs random networks over the streams, bit-exact, with
    random gaps and stalls."""
    cfg = read_config_env()
    rng = np.random.default_rng(int(os.environ.get("HWGEN_SEED", "0")))
    link = await _start(dut)
    link.pauses(int(os.environ.get("HWGEN_SEED", "0")))
    cases = []
    for index in range(int(os.environ.get("HWGEN_NETWORKS", "2"))):
        # More rows than a batch: two runs.
        cases.append(fitting_case(rng, cfg, index, max_m=6, runs=2))

    @bridge
    def host_side():
        acc = Accelerator(link, config=cfg, timeout=60.0)
        outs = []
        for _, prog, x in cases:
            acc.load(prog)
            outs.append(acc.infer(x))
        return outs

    outs = await host_side()
    for index, ((net, _, x), got) in enumerate(zip(cases, outs, strict=True)):
        mismatch = output_mismatch(got, net.forward(x))
        assert mismatch is None, f"network {index}: {mismatch}"
    dut._log.info("%d networks exact over AXI4-Stream, %d response frames", len(cases),
                  link.frames)


class _Transfers:
    """The cycles of the transfers on one AXI4-Stream port."""

    def __init__(self, dut, prefix):
        self.clk = dut.clk
        self.valid = getattr(dut, f"{prefix}__tvalid")
        self.ready = getattr(dut, f"{prefix}__tready")
        self.cycles = []
        cocotb.start_soon(self._watch())

    async def _watch(self):
        cycle = 0
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            cycle += 1
            if int(self.valid.value) and int(self.ready.value):
                self.cycles.append(cycle)

    def rate(self, first, count):
        """Bytes per cycle of transfers ``first .. first + count - 1``."""
        span = self.cycles[first + count - 1] - self.cycles[first] + 1
        return count / span


@cocotb.test()
async def test_byte_rate(dut):
    """Without gaps or stalls, a long WRITE goes in and a long READ comes out at (close to)
    one byte a cycle; the rates are logged and written to $HWGEN_RATES."""
    cfg = read_config_env()
    link = await _start(dut)
    s_in, s_out = _Transfers(dut, "s_axis"), _Transfers(dut, "m_axis")
    geo = regions(cfg)[Region.ACT]
    count = min(write_chunk_words(geo, MAX_PAYLOAD), geo.depth)
    words = [random.Random(5).getrandbits(geo.word_bits) for _ in range(count)]
    write = encode_request(Opcode.WRITE, 1, pack_access(Region.ACT, 0, count)
                           + pack_words(geo, words))
    read = encode_request(Opcode.READ, 2, pack_access(Region.ACT, 0, count))
    await link.source.send(write)
    frame = await link.sink.recv()
    assert frame.tdata[3] == 0, "the WRITE was refused"
    in_rate = s_in.rate(0, len(write))
    await link.source.send(read)
    frame = bytes((await link.sink.recv()).tdata)
    assert frame[HEADER_BYTES + CRC_BYTES:-CRC_BYTES] == pack_words(geo, words)
    out_first = len(s_out.cycles) - len(frame)
    out_rate = s_out.rate(out_first, len(frame))
    # The whole response frame: header, the READ's words, CRC.
    dut._log.info("AXI4-Stream: %d-byte request in at %.3f B/cycle, %d-byte response out at "
                  "%.3f B/cycle (%d-byte words)", len(write), in_rate, len(frame), out_rate,
                  geo.word_bytes)
    if os.environ.get("HWGEN_RATES"):
        with open(os.environ["HWGEN_RATES"], "w") as f:
            json.dump({"in_bytes": len(write), "in_rate": in_rate, "out_bytes": len(frame),
                       "out_rate": out_rate, "word_bytes": geo.word_bytes}, f)
