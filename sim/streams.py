"""cocotb drivers and monitors for ``amaranth.lib.stream`` ports, and lane packing helpers.

Drivers write in the middle of the clock cycle (falling edge) and sample in the read-only phase
of the same cycle, so a transfer is what the design sees at the next rising edge on every
simulator, whatever its event ordering.
"""

import random

from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

__all__ = ["Clocked", "StreamSink", "StreamSource", "pack", "unpack"]


def pack(values, bits, extra=()):
    """Pack signed ``values`` into lanes of ``bits`` bits; ``extra`` are ``(value, width)``
    fields above them (for example a ``last`` flag)."""
    word, pos, mask = 0, 0, (1 << bits) - 1
    for v in values:
        word |= (int(v) & mask) << pos
        pos += bits
    for v, width in extra:
        word |= (int(v) & ((1 << width) - 1)) << pos
        pos += width
    return word


def unpack(word, bits, lanes):
    """Return ``lanes`` signed values of ``bits`` bits from the low end of ``word``."""
    mask, sign = (1 << bits) - 1, 1 << (bits - 1)
    out = []
    for i in range(lanes):
        v = (word >> (i * bits)) & mask
        out.append(v - (1 << bits) if v & sign else v)
    return out


class Clocked:
    """Clock, reset and a cycle counter shared by the drivers of one test."""

    def __init__(self, dut, period_ns=10):
        self.dut = dut
        self.clk = dut.clk
        self.period = period_ns
        self.t0 = 0

    async def start(self, cycles_in_reset=3):
        """Start the clock, hold reset, and return in the middle of the first free cycle."""
        from cocotb import start_soon
        from cocotb.clock import Clock

        start_soon(Clock(self.clk, self.period, unit="ns").start())
        self.dut.rst.value = 1
        for _ in range(cycles_in_reset):
            await RisingEdge(self.clk)
        self.dut.rst.value = 0
        await FallingEdge(self.clk)
        self.mark()

    def mark(self):
        """Make the current cycle cycle 0."""
        from cocotb.utils import get_sim_time

        self.t0 = get_sim_time("ns")

    @property
    def cycle(self):
        from cocotb.utils import get_sim_time

        return int((get_sim_time("ns") - self.t0) // self.period)

    async def cycles(self, n):
        for _ in range(n):
            await FallingEdge(self.clk)


class StreamSource:
    """Drive ``<prefix>__valid`` / ``__payload`` and honour ``__ready``.

    ``idle`` is the probability of an idle cycle before each transfer.
    """

    def __init__(self, clocked, prefix, *, idle=0.0, seed=0):
        dut = clocked.dut
        self.clocked = clocked
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.idle = idle
        self.rng = random.Random(seed)
        self.valid.value = 0

    async def send(self, words):
        """Send every word in order; return in the cycle after the last transfer."""
        for word in words:
            while self.idle and self.rng.random() < self.idle:
                self.valid.value = 0
                await FallingEdge(self.clocked.clk)
            self.payload.value = word
            self.valid.value = 1
            while True:
                await ReadOnly()
                taken = bool(self.ready.value)
                await FallingEdge(self.clocked.clk)
                if taken:
                    break
        self.valid.value = 0


class StreamSink:
    """Accept transfers on ``<prefix>__valid`` / ``__ready``; record ``(cycle, payload)``.

    ``stall`` is the probability that ``ready`` is low in a cycle.
    """

    def __init__(self, clocked, prefix, *, stall=0.0, seed=1):
        dut = clocked.dut
        self.clocked = clocked
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.stall = stall
        self.rng = random.Random(seed)
        self.items = []
        self.ready.value = 0

    async def receive(self, count, timeout_cycles):
        """Collect ``count`` transfers; fail after ``timeout_cycles`` cycles."""
        for _ in range(timeout_cycles):
            self.ready.value = int(not (self.stall and self.rng.random() < self.stall))
            await ReadOnly()
            if self.valid.value and self.ready.value:
                self.items.append((self.clocked.cycle, int(self.payload.value)))
            await FallingEdge(self.clocked.clk)
            if len(self.items) >= count:
                self.ready.value = 0
                return self.items
        raise AssertionError(
            f"timeout: {len(self.items)} of {count} transfers after {timeout_cycles} cycles")
