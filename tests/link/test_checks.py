"""RequestChecks alone, against the check order of hwgen.protocol written out here in Python.

Each case sets a random header, arguments, CRC verdict, busy flag and program-loaded flag (many
near a limit: lengths, counts and addresses one below, at and one above what is allowed), runs
the byte count as the frame engine does (``start``, then ``step`` while ``more``) and compares
the status, the word size and the byte count with ``_expected``.
"""

import random

import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator
from support import TINY

from hwgen.config import AcceleratorConfig
from hwgen.link.checks import RequestChecks
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    FrameHeader,
    Opcode,
    Status,
    pack_access,
    pack_layout,
    pack_run,
)

NARROW = AcceleratorConfig(rows=4, cols=2, dataflow="os", in_bits=4, w_bits=4, acc_bits=16,
                           mult_bits=8, max_k=64, act_depth=16, weight_depth=16, param_depth=2,
                           acc_depth=4, out_depth=16, prog_depth=2)
_ARGS = 7        # bytes of a WRITE's or READ's arguments: region (1), addr (4), count (2)
_LENGTHS = {Opcode.INFO: 0, Opcode.COUNTERS: 0, Opcode.RESET: 0, Opcode.RUN: 2,
            Opcode.READ: _ARGS}


def _expected(config, max_payload, case):
    """The status of ``case``: its first failing check, or OK."""
    return next(_failures(config, max_payload, case), Status.OK)


def _failures(config, max_payload, case):
    """Yield the status of each check ``case`` fails, in the order of hwgen.protocol."""
    if not case["crc_ok"]:
        yield Status.BAD_CRC
    # (RequestChecks without features: LOAD, FETCH and CLASSES are unknown; their checks are
    # tests/link/test_wire_gateware.py's.)
    if case["opcode"] not in {op.value for op in (*_LENGTHS, Opcode.WRITE)}:
        yield Status.BAD_OPCODE
        return
    opcode, length = Opcode(case["opcode"]), case["length"]
    if opcode == Opcode.WRITE:
        if not _ARGS <= length <= max_payload:
            yield Status.BAD_LENGTH
    elif length != _LENGTHS[opcode]:
        yield Status.BAD_LENGTH
    access = opcode in (Opcode.WRITE, Opcode.READ)
    region, addr, count = case["region"], case["addr"], case["count"]
    if access:
        if region >= len(Region):
            yield Status.BAD_REGION
            return
        geometry = regions(config)[Region(region)]
        nbytes = count * geometry.word_bytes
        if count == 0 or (opcode == Opcode.WRITE and nbytes != length - _ARGS) \
                or (opcode == Opcode.READ and nbytes > max_payload):
            yield Status.BAD_LENGTH
        if addr + count > geometry.depth:
            yield Status.BAD_ADDRESS
    if opcode == Opcode.RUN and not 1 <= case["batch"] <= config.acc_depth:
        yield Status.BAD_BATCH
    if (access or opcode == Opcode.RUN) and case["busy"]:
        yield Status.BUSY
    if opcode == Opcode.RUN and not case["program_loaded"]:
        yield Status.NO_PROGRAM


def _random_case(rng, config, max_payload):
    geo = regions(config)
    known = [op for op in Opcode if op.value <= Opcode.RESET.value]  # (no stream commands)
    opcode = rng.choice([*known, *known, 0x00, 0x07, 0x08, 0x09, 0x7F, 0xFF])
    region = rng.choice([*(r.value for r in Region), len(Region), 7, 0xFF]) \
        if rng.random() < 0.2 else rng.choice(list(Region)).value
    g = geo.get(Region(region)) if region < len(Region) else geo[Region.ACT]
    limit = (max_payload - _ARGS) // g.word_bytes if opcode == Opcode.WRITE \
        else max_payload // g.word_bytes
    count = rng.choice([0, 1, 2, rng.randint(1, max(1, min(limit, g.depth))), limit,
                        limit + 1, 0xFFFF])
    addr = rng.choice([0, rng.randint(0, g.depth), g.depth - count, g.depth - count + 1,
                       g.depth, 0xFFFF_FFFF, 1 << 20]) % (1 << 32)
    length = rng.choice([_ARGS + count * g.word_bytes] * 3 + [
        0, 1, 2, 3, _ARGS - 1, _ARGS, _ARGS + 1, _ARGS + count * g.word_bytes + 1,
        _ARGS + count * g.word_bytes - 1, max_payload, max_payload + 1, 0xFFFF,
        rng.getrandbits(16)])
    if opcode in _LENGTHS and rng.random() < 0.6:
        length = _LENGTHS[opcode]
    raw_args = pack_access(region, addr, count)
    if opcode == Opcode.RUN:
        batch = rng.choice([0, 1, config.acc_depth, config.acc_depth + 1,
                            rng.randint(1, config.acc_depth), 0xFFFF])
        raw_args = pack_run(batch) + raw_args[2:]
    return {"opcode": getattr(opcode, "value", opcode), "length": min(length, 0xFFFF),
            "region": region,
            "addr": addr, "count": count, "raw_args": raw_args,
            "batch": int.from_bytes(raw_args[:2], "little"),
            "crc_ok": rng.random() < 0.9, "busy": rng.random() < 0.2,
            "program_loaded": rng.random() < 0.7}


def _run(config, max_payload, cases):
    """Return ``(status, word_bytes, xfer, steps)`` of each case."""
    dut = RequestChecks(config, max_payload=max_payload)
    results = []

    async def bench(ctx):
        for case in cases:
            header = pack_layout(FrameHeader, opcode=case["opcode"], length=case["length"])
            ctx.set(Value.cast(dut.header), int.from_bytes(header, "little"))
            ctx.set(Value.cast(dut.args), int.from_bytes(case["raw_args"], "little"))
            for name in ("crc_ok", "busy", "program_loaded"):
                ctx.set(getattr(dut, name), case[name])
            await ctx.tick()                  # the inputs hold from the cycle before `start`
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            steps = 0
            while ctx.get(dut.more):
                ctx.set(dut.step, 1)
                await ctx.tick()
                steps += 1
                assert steps <= max_payload + 1
            ctx.set(dut.step, 0)
            await ctx.tick()                  # valid from the cycle after `more` was low
            results.append((ctx.get(dut.status), ctx.get(dut.word_bytes), ctx.get(dut.xfer),
                            steps))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return results


@pytest.mark.parametrize(("config", "max_payload"), [
    (TINY, 64), (TINY, 1024), (NARROW, None), (NARROW, 100)],
    ids=["tiny-64", "tiny-1024", "narrow-least", "narrow-100"])
def test_random_requests(config, max_payload):
    if max_payload is None:  # the least the frame engine takes: a WRITE of one widest word
        max_payload = _ARGS + max(g.word_bytes for g in regions(config).values())
    rng = random.Random(max_payload)
    cases = [_random_case(rng, config, max_payload) for _ in range(400)]
    results = _run(config, max_payload, cases)
    statuses = set()
    for case, (status, word_bytes, xfer, steps) in zip(cases, results, strict=True):
        expected = _expected(config, max_payload, case)
        assert status == expected, case
        statuses.add(status)
        if case["opcode"] in (Opcode.WRITE.value, Opcode.READ.value) \
                and case["region"] < len(Region):
            g = regions(config)[Region(case["region"])]
            assert word_bytes == g.word_bytes
            nbytes = case["count"] * g.word_bytes
            # the count stops as soon as the words exceed the buffer
            assert xfer == nbytes if nbytes <= max_payload else xfer > max_payload
            assert steps <= max_payload // g.word_bytes + 1
    assert statuses == set(Status) - {Status.REFUSED}  # every check was reached


def test_parameter_checks(refused):
    refused("config must be an AcceleratorConfig", lambda: RequestChecks({}, max_payload=64),
            TypeError)
    for bad in (0, 1 << 16, True, 64.0):
        refused("max_payload must be an int in 1..65535",
                lambda b=bad: RequestChecks(TINY, max_payload=b))
