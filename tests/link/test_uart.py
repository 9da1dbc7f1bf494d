# amaranth: UnusedElaboratable=no
"""Tests of hwgen.link.uart against a bit-banging 8N1 model written here.

The model (``_frame``, ``_waveform``, ``_decode``) builds the levels a UART line should carry and
reads bytes back from levels; every expected bit and byte comes from it, never from the design.
``_simulate`` runs one component and returns what it did, so each case is one short test.

The first line turns off Amaranth's UnusedElaboratable warning for this file only:
``test_bad_divisor`` builds components whose constructors raise, which are never elaborated.
"""

import dataclasses
import itertools
import random
import re

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from hwgen.link.uart import MIN_DIVISOR, UART, UARTRx, UARTTx, divisor_for

_BITS_PER_FRAME = 10
_MAX_CYCLES = 100_000


# --- independent 8N1 model ------------------------------------------------------------------


def _frame(byte, stop=1):
    """Return the bits of one 8N1 frame: start (0), data LSB first, stop."""
    return [0, *((byte >> i) & 1 for i in range(8)), stop]


def _waveform(bits, period, idle=0):
    """Return per-cycle line levels: ``idle`` cycles high, then ``bits`` at ``period`` cycles each.

    ``period`` may be fractional (a peer with another clock); bit ``i`` then covers the cycles
    ``c`` with ``floor(c / period) == i``.
    """
    cycles = int(len(bits) * period)
    return [1] * idle + [bits[int(c / period)] for c in range(cycles)]


def _decode(levels, period):
    """Read 8N1 frames from per-cycle levels; return ``(start_cycle, byte, stop_bit)`` tuples.

    Hunts for a falling edge, then samples the middle of each bit, like a textbook receiver.
    """
    frames = []
    cycle = 1
    while cycle < len(levels):
        if not (levels[cycle - 1] == 1 and levels[cycle] == 0):
            cycle += 1
            continue
        samples = [cycle + int((i + 0.5) * period) for i in range(_BITS_PER_FRAME)]
        if samples[-1] >= len(levels):
            break
        bits = [levels[s] for s in samples]
        assert bits[0] == 0, f"start bit at cycle {cycle} is not low at its middle"
        frames.append((cycle, sum(b << i for i, b in enumerate(bits[1:9])), bits[9]))
        cycle = samples[-1]
    return frames


def _check_tx_line(levels, data, divisor, back_to_back=False):
    """Check that ``levels`` carries exactly the frames of ``data``, each bit ``divisor`` long."""
    assert levels[0] == 1, "tx must idle high"
    frames = _decode(levels, divisor)
    assert [byte for _, byte, _ in frames] == list(data)
    for start, byte, _ in frames:
        expected = [bit for bit in _frame(byte) for _ in range(divisor)]
        assert levels[start:start + len(expected)] == expected, f"frame of {byte:#04x}"
    if back_to_back:
        starts = [start for start, _, _ in frames]
        assert {b - a for a, b in itertools.pairwise(starts)} <= {_BITS_PER_FRAME * divisor}


# --- the one simulation helper ----------------------------------------------------------------


@dataclasses.dataclass
class _Result:
    tx: list  # tx level in each cycle (empty for a receiver alone)
    received: list  # bytes taken from o_data, in order
    err_frame: list  # cycles in which err_frame was high
    err_overrun: list  # cycles in which err_overrun was high
    frame_errors: int  # the counter at the end


def _simulate(dut, *, line=(), send=(), ready=None, gaps=0, loopback=False, seed=0, setup=()):
    """Run ``dut`` and return a :class:`_Result`.

    ``line`` drives ``rx`` cycle by cycle (then high); ``send`` is offered on ``i_data``, with
    a random idle time of 0 to ``gaps`` cycles before each byte; ``ready(cycle)`` drives
    ``o_data.ready`` (always high if ``None``); ``loopback`` wires ``tx`` to ``rx`` in hardware;
    ``setup`` is ``(signal, value)`` pairs set before the first cycle. The run ends once the
    line, the bytes to send and the received bytes are all through.
    """
    members = dut.signature.members
    has_tx, has_rx = "i_data" in members, "o_data" in members
    frame_cycles = _BITS_PER_FRAME * dut.divisor
    rng = random.Random(seed)
    result = _Result([], [], [], [], 0)

    top = dut
    if loopback:
        top = Module()
        top.submodules.dut = dut
        top.d.comb += dut.rx.eq(dut.tx)

    async def bench(ctx):
        for signal, value in setup:
            ctx.set(signal, value)
        pending = list(send)
        idle = rng.randint(0, gaps)
        end = len(line) + frame_cycles + frame_cycles // 4
        cycle = 0
        while cycle < end or pending:
            assert cycle < _MAX_CYCLES, "simulation did not finish"
            if has_rx and not loopback:
                ctx.set(dut.rx, line[cycle] if cycle < len(line) else 1)
            if has_tx:
                offer = bool(pending) and idle == 0
                ctx.set(dut.i_data.valid, offer)
                if offer:
                    ctx.set(dut.i_data.payload, pending[0])
                    if ctx.get(dut.i_data.ready):
                        pending.pop(0)
                        idle = rng.randint(0, gaps)
                        # Let this byte's frame, and its trip back in a loopback, finish.
                        end = max(end, cycle + 2 * frame_cycles)
                elif idle:
                    idle -= 1
                result.tx.append(ctx.get(dut.tx))
            if has_rx:
                take = True if ready is None else ready(cycle)
                ctx.set(dut.o_data.ready, take)
                if ctx.get(dut.o_data.valid):
                    end = max(end, cycle + 1)  # drain what the receiver still holds
                    if take:
                        result.received.append(ctx.get(dut.o_data.payload))
                if ctx.get(dut.err_frame):
                    result.err_frame.append(cycle)
                if ctx.get(dut.err_overrun):
                    result.err_overrun.append(cycle)
            await ctx.tick()
            cycle += 1
        if has_rx:
            result.frame_errors = ctx.get(dut.frame_errors)

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return result


def _line(frames, divisor, idle=3):
    """Return the levels of ``frames`` (bit lists) sent back to back at ``divisor``."""
    return _waveform([bit for frame in frames for bit in frame], divisor, idle=idle)


def _both_ways(divisor, data):
    """Send ``data`` with the transmitter and, at the same time, receive it from the model."""
    result = _simulate(UART(divisor), send=data, line=_line(map(_frame, data), divisor))
    _check_tx_line(result.tx, data, divisor)
    assert result.received == data
    assert (result.err_frame, result.err_overrun, result.frame_errors) == ([], [], 0)


_PATTERNS = [0x00, 0xFF, 0x55, 0xAA, 0x01, 0x80, 0x0F, 0xF0, 0x3C, 0xC3]


# --- cases ----------------------------------------------------------------------------------


def test_8n1_div4():
    _both_ways(4, _PATTERNS)


def test_8n1_div10():
    _both_ways(10, [*_PATTERNS, *random.Random(10).choices(range(256), k=6)])


def test_back_to_back():
    data = random.Random(2).choices(range(256), k=12)
    # send is offered on every cycle, line frames follow each other with no idle bit.
    result = _simulate(UART(5), send=data, line=_line(map(_frame, data), 5))
    _check_tx_line(result.tx, data, 5, back_to_back=True)
    assert result.received == data
    assert (result.err_frame, result.err_overrun) == ([], [])


def test_err_frame():
    good, bad = [0x5A, 0x3C, 0x81], [0xC3, 0x00, 0xFF]
    # Each bad frame (stop bit low) is followed by one idle bit, as a real peer's next stop bit.
    frames = [_frame(good[0]), _frame(bad[0], stop=0), [1], _frame(good[1]),
              _frame(bad[1], stop=0), [1], _frame(bad[2], stop=0), [1], _frame(good[2])]
    result = _simulate(UARTRx(8), line=_line(frames, 8))
    assert result.received == good
    assert len(result.err_frame) == 3 and result.frame_errors == 3
    assert all(b - a > 1 for a, b in itertools.pairwise(result.err_frame)), "not pulses"
    assert result.err_overrun == []


def test_frame_errors_saturate():
    dut = UARTRx(4)
    frames = [_frame(0x00, stop=0), [1], _frame(0x00, stop=0), [1], _frame(0x42)]
    result = _simulate(dut, line=_line(frames, 4), setup=[(dut.frame_errors, 0xFFFE)])
    assert len(result.err_frame) == 2 and result.frame_errors == 0xFFFF
    assert result.received == [0x42]


def test_err_overrun():
    divisor = 6
    first, dropped, last = 0xA5, [0x5A, 0x11], 0x7E
    held = _line([_frame(first), *map(_frame, dropped)], divisor)
    line = held + _line([_frame(last)], divisor, idle=4 * divisor)
    # Nobody takes o_data until all three frames are in: the 2nd and 3rd have nowhere to go.
    release = len(held) + 2 * divisor
    result = _simulate(UARTRx(divisor), line=line, ready=lambda cycle: cycle >= release)
    assert result.received == [first, last]
    assert len(result.err_overrun) == 2
    assert all(cycle < release for cycle in result.err_overrun)
    assert (result.err_frame, result.frame_errors) == ([], 0)


def test_glitch_start_bit():
    divisor = 16
    line = []
    # Low for less than half a bit: gone by the start bit's middle.
    for width in (1, 3, divisor // 2 - 2):
        line += [1] * 2 * divisor + [0] * width
    line += _line([_frame(0x96)], divisor, idle=2 * divisor)
    result = _simulate(UARTRx(divisor), line=line)
    assert result.received == [0x96]
    assert (result.err_frame, result.err_overrun, result.frame_errors) == ([], [], 0)


def test_break_recovers():
    divisor = 10
    # A BREAK of five frame times, then two idle bits and a normal byte.
    frames = [_frame(0x11), [0] * 5 * _BITS_PER_FRAME, [1, 1], _frame(0x22), _frame(0x33)]
    result = _simulate(UARTRx(divisor), line=_line(frames, divisor))
    assert result.received == [0x11, 0x22, 0x33]
    assert len(result.err_frame) == 1 and result.frame_errors == 1
    assert result.err_overrun == []


def test_baud_mismatch_tolerance():
    rng = random.Random(3)
    for divisor in (10, 16):
        for skew in (0.97, 0.98, 1.02, 1.03):
            data = rng.choices(range(256), k=16)
            bits = [bit for byte in data for bit in _frame(byte)]
            # A peer whose bit period is off by `skew`, sending back to back (the worst case).
            line = _waveform(bits, divisor * skew, idle=rng.randint(1, divisor))
            result = _simulate(UARTRx(divisor), line=line)
            assert result.received == data, f"divisor {divisor}, peer period x{skew}"
            assert result.frame_errors == 0


def test_loopback_all_bytes():
    divisor = 4
    data = list(range(256))
    random.Random(4).shuffle(data)
    back_pressure = random.Random(5)
    result = _simulate(UART(divisor), send=data, loopback=True, gaps=2 * _BITS_PER_FRAME * divisor,
                       ready=lambda cycle: back_pressure.random() < 0.5)
    assert result.received == data
    _check_tx_line(result.tx, data, divisor)
    assert (result.err_frame, result.err_overrun, result.frame_errors) == ([], [], 0)


@pytest.mark.parametrize("component", [UARTTx, UARTRx, UART])
@pytest.mark.parametrize("divisor", [MIN_DIVISOR - 1, 0, -8, 16.0, "16", True, None])
def test_bad_divisor(component, divisor):
    message = f"divisor must be an int >= {MIN_DIVISOR} (clock cycles per bit), not {divisor!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        component(divisor)


def test_divisor_for():
    assert divisor_for(12_000_000, 115_200) == 104
    assert divisor_for(48e6, 3e6) == 16
    assert divisor_for(1_000_000, 250_000) == MIN_DIVISOR
    with pytest.raises(ValueError, match=r"clk_hz=1000000 and baud=300000 give divisor 3"):
        divisor_for(1_000_000, 300_000)
    with pytest.raises(ValueError, match=r"baud=230400 give divisor 4.*8\.51% off"):
        divisor_for(1_000_000, 230_400)
    with pytest.raises(ValueError, match=r"baud must be a positive number, not 0"):
        divisor_for(12_000_000, 0)
    with pytest.raises(ValueError, match=r"clk_hz must be a positive number, not '12e6'"):
        divisor_for("12e6", 9600)


# --- the boards' bridge rates -----------------------------------------------------------------

# (clock of the UART, baud) as `hwgen build` makes the boards' bridge rates: the ULX3S's 3 Mbaud
# on its 62.5 MHz design clock (21 cycles a bit, 0.8 % slow), the iCEBreaker's 3 Mbaud on
# 12 MHz (4 cycles) and its FT2232H's 6 Mbaud on a 36 MHz PLL clock (6 cycles), and 12 Mbaud on
# a 60 MHz one (5 cycles, as no preset builds it).
_BRIDGE_LINKS = [(62_500_000, 3_000_000), (12_000_000, 3_000_000), (36_000_000, 6_000_000),
                 (60_000_000, 12_000_000)]


@pytest.mark.parametrize(("clk_hz", "baud"), _BRIDGE_LINKS)
@pytest.mark.parametrize("bridge_error", [-0.02, 0.02])
def test_bridge_rate_with_a_skewed_bridge(clk_hz, baud, bridge_error):
    """A bridge whose bit time is off by 2 % from the nominal rate (not from the divisor's
    rate: the divisor's own error adds to it), sending back to back, and the UART's own frames
    read at that bridge's bit time: bit-exact both ways."""
    divisor = divisor_for(clk_hz, baud)
    period = clk_hz / baud * (1 + bridge_error)   # the bridge's bit, in UART clock cycles
    rng = random.Random(clk_hz + baud)
    data = [*rng.choices(range(256), k=24), 0x00, 0xFF, 0x55, 0xAA]
    line = _waveform([bit for byte in data for bit in _frame(byte)], period,
                     idle=rng.randint(1, divisor))
    result = _simulate(UART(divisor), send=data, line=line)
    assert result.received == data, f"{baud} baud at {clk_hz} Hz, bridge {bridge_error:+.0%}"
    assert (result.err_frame, result.err_overrun, result.frame_errors) == ([], [], 0)
    # The bridge samples the UART's line mid-bit at its own, skewed, bit time.
    assert [byte for _, byte, stop in _decode(result.tx, period) if stop] == data
