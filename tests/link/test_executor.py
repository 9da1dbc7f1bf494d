"""CommandExecutor alone, between a Python frame layer and a Python host port.

The testbench (``_run``) plays both neighbours once per cycle. As the frame layer it hands over
each request's payload bytes (with random idle cycles) and ``done``, waits for the answer, takes
its header's time, pulses ``begin`` and takes the payload with random backpressure, keeping
``last`` and ``next_index`` as :class:`hwgen.link.framing.FrameCodec` promises. As the host port
it keeps the memories as Python lists, answers reads after a fixed latency (or, in handshake
mode, answers every request after a random delay and checks that it is held until then), and
keeps a busy flag and counters. ``_script`` builds random requests together with what must
happen: the status, the payload and the changes to memory, program-loaded flag and run count.
"""

import gc
import random
import warnings
from dataclasses import dataclass, field

import pytest
from amaranth.hdl import UnusedElaboratable, Value
from amaranth.sim import Simulator
from support import TINY

from hwgen.link.executor import CommandExecutor
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    FrameHeader,
    Opcode,
    Status,
    info_bytes,
    pack_layout,
    pack_read,
    pack_run,
    pack_words,
    pack_write,
    unpack_counters,
)

_ARGS = 7
_HEADER_TIME = 10   # the response header's bytes (header and its CRC)


@dataclass
class _Request:
    opcode: int
    payload: bytes
    status: Status                  # expected
    answer: bytes | None = None     # expected payload (None: COUNTERS, checked apart)
    crc_ok: bool = True
    busy: bool = False              # the port is held busy while the request is checked
    program_loaded: bool = False    # expected flag and run count after it (COUNTERS)
    runs: int = 0


@dataclass
class _Port:
    """The Python host port: memories, busy flag, counters and what the executor asked."""

    words: dict
    busy_left: int = 0
    forced_busy: bool = False
    cycles: int = 0
    busy_cycles: int = 0
    batches: list = field(default_factory=list)
    clears: int = 0
    reads: int = 0
    snapshots: list = field(default_factory=list)

    @property
    def busy(self):
        return self.forced_busy or self.busy_left > 0


def _script(rng, config, max_payload, n):
    """Return ``(requests, words)``: ``n`` random requests and the memories they leave."""
    geo = regions(config)
    words = {r: [0] * g.depth for r, g in geo.items()}
    loaded, runs = False, 0
    requests = []
    for _ in range(n):
        kind = rng.choice(["write"] * 3 + ["read"] * 2 + ["run"] * 3 + ["counters"] * 2 + [
            "info", "reset", "bad-crc", "busy", "bad-opcode", "bad-region"])
        # a refused request is one of the requests that change something
        base = rng.choice(["write", "read", "run"]) if kind in ("bad-crc", "busy") else kind
        # (PROGRAM often, so that RUNs start)
        region = Region.PROGRAM if rng.random() < 0.3 else rng.choice(list(Region))
        g = geo[region]
        room = max_payload - _ARGS if base == "write" else max_payload
        count = rng.randint(1, min(g.depth, 6, room // g.word_bytes))
        addr = rng.randint(0, g.depth - count)
        values = [rng.getrandbits(g.word_bits) for _ in range(count)]
        read = pack_read(g, addr, count)
        opcode, payload = {
            "write": (Opcode.WRITE, pack_write(g, addr, values)),
            "read": (Opcode.READ, read),
            "run": (Opcode.RUN, pack_run(rng.randint(1, config.acc_depth))),
            "info": (Opcode.INFO, b""),
            "counters": (Opcode.COUNTERS, b""),
            "reset": (Opcode.RESET, b""),
            "bad-opcode": (0x7F, b""),
            "bad-region": (Opcode.READ, bytes([len(Region)]) + read[1:]),
        }[base]
        req = _Request(getattr(opcode, "value", opcode), payload, Status.OK, b"",
                       crc_ok=kind != "bad-crc", busy=kind == "busy")
        if kind == "bad-crc":
            req.status = Status.BAD_CRC
        elif kind == "busy":
            req.status = Status.BUSY
        elif kind == "bad-opcode":
            req.status = Status.BAD_OPCODE
        elif kind == "bad-region":
            req.status = Status.BAD_REGION
        elif opcode == Opcode.WRITE:
            words[region][addr:addr + count] = values
            loaded |= region == Region.PROGRAM
        elif opcode == Opcode.READ:
            req.answer = pack_words(g, words[region][addr:addr + count])
        elif opcode == Opcode.RUN:
            if loaded:
                runs += 1
            else:
                req.status = Status.NO_PROGRAM
        elif opcode == Opcode.INFO:
            req.answer = info_bytes(config, max_payload)
        elif opcode == Opcode.COUNTERS:
            req.answer = None
        elif opcode == Opcode.RESET:
            loaded, runs = False, 0
        req.program_loaded, req.runs = loaded, runs
        requests.append(req)
    return requests, words


def _run(config, requests, *, max_payload, handshake, latency, seed, gap=0.3, stall=0.3,
         prefetch=False, wide=False):
    """Simulate; return ``(answers, port)``: ``(status, payload)`` per request, and the port."""
    rng = random.Random(seed)
    dut = CommandExecutor(config, max_payload=max_payload, handshake=handshake,
                          prefetch=prefetch, wide=wide)
    rq, rs, host = dut.request, dut.response, dut.host
    geo = regions(config)
    port = _Port({r: [0] * g.depth for r, g in geo.items()})
    answers = []
    # the request strobes, and the values each must hold until it is answered
    strobes = {"we": ("region", "addr", "wdata"), "re": ("region", "addr"),
               "start": ("batch",), "clear": (), "snapshot": ()}

    async def bench(ctx):
        pending = None       # handshake: [strobe, cycles left, the values held]
        read = None          # direct: [cycles left, word] of the read under way
        for req in requests:
            header = pack_layout(FrameHeader, opcode=req.opcode, length=len(req.payload))
            ctx.set(Value.cast(rq.header), int.from_bytes(header, "little"))
            ctx.set(rq.crc_ok, req.crc_ok)
            steps = []       # the request's payload bytes with idle cycles, then `done`
            for k in range(len(req.payload)):
                if rng.random() < gap:
                    steps.append(None)
                steps.append(k)
            steps += [None, None, "done"]
            phase, shown, taken, status, length, payload = "request", 0, 0, None, None, []
            for _ in range(5_000):
                port.forced_busy = req.busy and phase in ("request", "header")
                step = steps.pop(0) if phase == "request" else None
                ctx.set(rq.payload.valid, isinstance(step, int))
                ctx.set(rq.index, step if isinstance(step, int) else 0)
                ctx.set(rq.payload.payload, req.payload[step] if isinstance(step, int) else 0)
                ctx.set(rq.done, step == "done")
                # -- the frame layer's side of the response: the header goes out while
                # `valid`, then the payload, then the trailer
                if phase == "header" and ctx.get(rs.valid) and status is None:
                    status, length = ctx.get(rs.status), ctx.get(rs.length)
                if status is not None:
                    assert ctx.get(rs.valid) or phase != "header", "the answer withdrawn"
                    assert (ctx.get(rs.status), ctx.get(rs.length)) == (status, length)
                shown_now = status is not None and phase == "header" \
                    and rng.random() >= stall
                ctx.set(rs.begin, shown_now and shown == _HEADER_TIME - 1 and length > 0)
                in_payload = phase == "payload"
                ready = in_payload and rng.random() >= stall
                ctx.set(rs.payload.ready, ready)
                ctx.set(rs.last, in_payload and taken == length - 1)
                p_taken = ready and ctx.get(rs.payload.valid)
                ctx.set(rs.next_index, taken + p_taken if in_payload else 0)
                if p_taken:
                    payload.append(ctx.get(rs.payload.payload))
                # -- the host port
                port.cycles += 1
                port.busy_cycles += port.busy
                for name, value in (("busy", port.busy), ("cycles", port.cycles),
                                    ("busy_cycles", port.busy_cycles),
                                    ("macs", 3 * port.busy_cycles)):
                    ctx.set(getattr(host, name), value)
                asked = [s for s in strobes if ctx.get(getattr(host, s))]
                assert len(asked) <= 1, asked
                if pending is not None or asked:
                    values = [ctx.get(Value.cast(getattr(host, h)))
                              for h in strobes[pending[0] if pending else asked[0]]]
                rvalid, rdata = False, 0
                if handshake:
                    if pending is not None:
                        # a read is a pulse that waits; the other requests are held
                        again = [] if pending[0] == "re" else [pending[0]]
                        assert asked == again and values == pending[2], "not held"
                    elif asked:
                        pending = [asked[0], rng.choice([0, 0, 1, 3, 7]), values]
                    if pending is not None and pending[1] == 0:
                        rvalid, rdata = True, _effect(ctx, port, host, pending[0], geo)
                        pending = None
                    elif pending is not None:
                        pending[1] -= 1
                else:
                    for strobe in asked:
                        word = _effect(ctx, port, host, strobe, geo)
                        if strobe == "re":
                            assert read is None, "a read before the last one answered"
                            read = [latency, word]
                    if read is not None and read[0] == 0:
                        rvalid, rdata, read = True, read[1], None
                    elif read is not None:
                        read[0] -= 1
                ctx.set(host.rvalid, rvalid)
                ctx.set(host.rdata, rdata)
                # -- the frame layer's next phase
                if phase == "request" and step == "done":
                    phase = "header"
                elif shown_now:
                    shown += 1
                    if shown == _HEADER_TIME:
                        phase, shown = ("payload" if length else "trailer"), 0
                elif p_taken:
                    taken += 1
                    if taken == length:
                        phase = "trailer"
                elif phase == "trailer":
                    shown += 1
                    phase = "trailer" if shown < 2 else "finished"
                port.busy_left = max(0, port.busy_left - 1)
                await ctx.tick()
                if phase == "finished":
                    break
            else:
                raise AssertionError(f"{req} was not answered")
            answers.append((status, bytes(payload)))
            # the next request waits for the program to finish (a BUSY case holds busy itself)
            while port.busy_left:
                port.busy_left -= 1
                ctx.set(host.busy, 1)
                await ctx.tick()
            ctx.set(host.busy, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return answers, port


def _effect(ctx, port, host, strobe, geo):
    """Carry out ``strobe`` on the port model; return the read word (0 for the others)."""
    assert not port.busy or strobe in ("clear", "snapshot"), f"{strobe} while busy"
    addr = ctx.get(host.addr)
    if strobe in ("we", "re"):
        region = Region(ctx.get(Value.cast(host.region)))
    if strobe == "we":
        wdata = ctx.get(host.wdata)
        assert wdata >> (8 * geo[region].word_bytes) == 0, "bytes above the word"
        port.words[region][addr] = wdata
    elif strobe == "re":
        port.reads += 1
        return port.words[region][addr]
    elif strobe == "start":
        port.batches.append(ctx.get(host.batch))
        port.busy_left = random.Random(addr).randint(3, 30)
    elif strobe == "clear":
        port.clears += 1
        port.cycles = port.busy_cycles = 0
    elif strobe == "snapshot":
        port.snapshots.append((port.busy, port.cycles, port.busy_cycles))
    return 0


@pytest.mark.parametrize(("handshake", "latency", "least", "prefetch"), [
    (False, 1, False, False), (False, 0, False, False), (False, 2, True, False),
    (True, None, False, False), (True, None, True, False),
    (False, 1, False, True), (False, 0, True, True), (False, 2, False, True),
    (True, None, False, True), (False, 1, False, "wide"), (False, 0, True, "wide"),
    (True, None, False, "wide"), (True, None, True, "wide")],
    ids=["latency-1", "latency-0", "latency-2-least-payload", "handshake",
         "handshake-least-payload", "prefetch-latency-1", "prefetch-latency-0-least-payload",
         "prefetch-latency-2", "prefetch-handshake", "wide-latency-1",
         "wide-latency-0-least-payload", "wide-handshake", "wide-handshake-least-payload"])
def test_random_requests(handshake, latency, least, prefetch):
    """(``prefetch="wide"``: the executor of a byte-stream device, prefetch and wide.)"""
    config = TINY
    geo = regions(config)
    max_payload = _ARGS + max(g.word_bytes for g in geo.values()) if least else 64
    wide = prefetch == "wide"
    rng = random.Random((hash((handshake, latency, least)) & 0xFFFF) + 0x10000 * bool(prefetch)
                        + 0x20000 * wide)
    requests, words = _script(rng, config, max_payload, 80)
    answers, port = _run(config, requests, max_payload=max_payload, handshake=handshake,
                         latency=latency, seed=rng.getrandbits(16), prefetch=bool(prefetch),
                         wide=wide)
    snapshots = iter(port.snapshots)
    for req, (status, payload) in zip(requests, answers, strict=True):
        assert status == req.status, req
        if req.status != Status.OK:
            assert payload == b"", req
        elif req.answer is not None:
            assert payload == req.answer, req
        else:  # COUNTERS: the port's counters when the executor took its snapshot
            busy, cycles, busy_cycles = next(snapshots)
            counters = unpack_counters(payload)
            assert (counters.busy, counters.program_loaded, counters.runs) == (
                busy, req.program_loaded, req.runs)
            assert (counters.cycles, counters.busy_cycles, counters.macs) == (
                cycles, busy_cycles, 3 * busy_cycles)
    assert port.words == words
    runs = [req for req in requests if req.opcode == Opcode.RUN.value
            and req.status == Status.OK]
    assert port.batches == [int.from_bytes(req.payload, "little") for req in runs]
    assert port.clears == sum(req.opcode == Opcode.RESET.value for req in requests)
    assert port.reads == sum(len(req.answer) // geo[Region(req.payload[0])].word_bytes
                             for req in requests if req.opcode == Opcode.READ.value
                             and req.status == Status.OK)


def test_parameter_checks(refused):
    widest = max(g.word_bytes for g in regions(TINY).values())
    refused("config must be an AcceleratorConfig",
            lambda: CommandExecutor({}, max_payload=64), TypeError)
    for bad in (_ARGS + widest - 1, 1 << 16, True, 64.0):
        refused(f"max_payload must be an int in {_ARGS + widest}..65535",
                lambda b=bad: CommandExecutor(TINY, max_payload=b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        executor = CommandExecutor(TINY, max_payload=_ARGS + widest)
        assert executor.max_payload == _ARGS + widest
        del executor
        gc.collect()
