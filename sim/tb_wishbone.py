"""cocotb test bench of the Wishbone top (``hwgen.bus.wishbone_top.WishboneTop``), driven by
cocotbext-wishbone's ``WishboneMaster`` as a CPU would drive it.

A random network is compiled with :func:`hwgen.compile`, loaded through the memory windows
and run through the registers by :mod:`host.plan`'s plans (the words the host protocol's WRITE
and READ carry); the output must equal :class:`hwgen.nn.QuantizedNetwork` ``.forward`` bit for
bit (on a ``dtype="bf16"`` design a random bf16 MLP, :class:`hwgen.nn.Bf16Network`'s), the
counters the cycle model, and ``irq``, ``STATUS`` and the bus errors must behave as
docs/integration.md says.

Environment: ``HWGEN_CONFIG``, ``HWGEN_SEED``, ``HWGEN_NETWORKS``.
"""

import os

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge
from cocotbext.wishbone.driver import WBOp, WishboneMaster

from host.plan import execute_load_async, execute_run_async, output_values, run_plans
from hwgen.bus.regmap import ID_VALUE, RegisterMap
from hwgen.cycles import program_cycles
from hwgen.memmap import Region
from sim.bf16_runs import nan_act
from sim.cases import fitting_case, output_mismatch
from sim.runner import read_config_env
from sim.streams import Clocked

_ACK, _ERR = 1, 2
_SIGNALS = {"cyc": "cyc", "stb": "stb", "we": "we", "adr": "adr", "datwr": "dat_w",
            "datrd": "dat_r", "ack": "ack"}


class WishboneCpu:
    """What a CPU's driver does through the Wishbone top: registers by name, region words
    through the windows (the ``write``/``read``/``run`` of :mod:`host.plan`'s executors)."""

    def __init__(self, dut, regmap):
        self.dut = dut
        self.map = regmap
        self.master = WishboneMaster(dut, "bus", dut.clk, width=32, timeout=10_000,
                                     signals_dict=_SIGNALS, bus_separator="__")
        self.counters = None

    async def ops(self, ops):
        """Carry out ``ops`` (WBOp, byte addresses) in one bus cycle; return their replies."""
        for op in ops:
            op.adr //= 4
        return await self.master.send_cycle(ops)

    async def reg(self, name, value=None):
        """Read register ``name`` (return its value) or write ``value`` to it."""
        (res,) = await self.ops([WBOp(self.map[name].offset, value)])
        assert res.ack == _ACK, f"{name}: answered err"
        return None if value is not None else int(res.datrd)

    def _addrs(self, region, base, count):
        w = self.map.window(region)
        return w, [w.offset + 4 * ((base + i) * w.stride + k)
                   for i in range(count) for k in range(w.pieces)]

    async def write(self, region, base, words):
        w, addrs = self._addrs(region, base, len(words))
        data = [(int(word) >> (32 * k)) & 0xFFFF_FFFF for word in words
                for k in range(w.pieces)]
        replies = await self.ops([WBOp(a, d) for a, d in zip(addrs, data, strict=True)])
        assert all(r.ack == _ACK for r in replies), f"a write to {region.name} answered err"

    async def read(self, region, base, count):
        w, addrs = self._addrs(region, base, count)
        replies = await self.ops([WBOp(a) for a in addrs])
        assert all(r.ack == _ACK for r in replies), f"a read of {region.name} answered err"
        pieces = [int(r.datrd) for r in replies]
        return [sum(p << (32 * k) for k, p in enumerate(pieces[i:i + w.pieces]))
                for i in range(0, len(pieces), w.pieces)]

    async def run(self, batch):
        """Clear the counters, start a run, check that the memories refuse the bus while it
        runs, wait for ``irq``; return the counters (also in :attr:`counters`)."""
        ctl = self.map["CONTROL"]
        await self.reg("CONTROL", ctl.field("CLEAR_COUNTERS").mask)
        await self.reg("BATCH", batch)
        await self.reg("CONTROL", ctl.field("START").mask)
        status = await self.reg("STATUS")
        assert status & self.map["STATUS"].field("BUSY").mask, "BUSY did not rise after START"
        assert int(self.dut.irq.value) == 0
        (res,) = await self.ops([WBOp(self.map.window(Region.ACT).offset)])
        assert res.ack == _ERR, "a window read while busy was not answered err"
        while not int(self.dut.irq.value):
            await RisingEdge(self.dut.clk)
        status = await self.reg("STATUS")
        assert status == (self.map["STATUS"].field("DONE").mask
                          | self.map["STATUS"].field("IRQ").mask
                          | self.map["STATUS"].field("ERROR").mask), f"STATUS {status:#x}"
        self.counters = {}
        for name in ("cycles", "busy_cycles", "macs"):
            lo = await self.reg(f"{name.upper()}_LO")
            self.counters[name] = lo | await self.reg(f"{name.upper()}_HI") << 32
        self.counters["runs"] = await self.reg("RUNS")
        await self.reg("CONTROL", ctl.field("CLEAR_DONE").mask | ctl.field("CLEAR_ERROR").mask)
        assert int(self.dut.irq.value) == 0, "irq did not fall on CLEAR_DONE"
        return self.counters


def rmap_holes(rmap):
    """Return byte offsets the map does not have: an unused slot and register offset, the
    first word past a region's depth, a piece past its word."""
    holes = [7 << (rmap.window_shift + 2), 0xFC]
    for w in rmap.windows:
        if w.depth * w.stride < 1 << rmap.window_shift:
            holes.append(w.offset + 4 * w.depth * w.stride)
        if w.pieces < w.stride:
            holes.append(w.offset + 4 * w.pieces)
    return holes


@cocotb.test()
async def test_infer_through_the_bus(dut):
    """Load and run random networks through the registers and windows, bit-exact."""
    cfg = read_config_env()
    rng = np.random.default_rng(int(os.environ.get("HWGEN_SEED", "0")))
    clocked = Clocked(dut)
    await clocked.start()
    cpu = WishboneCpu(dut, RegisterMap(cfg))
    assert await cpu.reg("ID") == ID_VALUE
    assert await cpu.reg("CONFIG_HASH") == cfg.hash_int >> 32
    for index in range(int(os.environ.get("HWGEN_NETWORKS", "2"))):
        net, prog, x = fitting_case(rng, cfg, index, max_m=4)
        if cfg.dtype == "bf16":
            # NaN in every lane first: a lane a pass leaves stale poisons the next pass.
            await cpu.write(*nan_act(cfg))
        await execute_load_async(cpu, prog)
        (plan,) = run_plans(prog, x)
        # The window access while busy in cpu.run is answered err: ERROR is set then.
        (lanes,) = await execute_run_async(cpu, plan)
        got, want = output_values(prog, prog.output, lanes), net.forward(x)
        mismatch = output_mismatch(got, want)
        assert mismatch is None, f"network {index}: {mismatch}"
        assert cpu.counters["cycles"] == program_cycles(prog, len(x))
        assert cpu.counters["runs"] == 1
        dut._log.info("network %d batch %d: exact, %d cycles", index, len(x),
                      cpu.counters["cycles"])


@cocotb.test()
async def test_errors_and_interrupt_enable(dut):
    """Bad accesses answer err and set ERROR_CAUSE.BUS; a refused start; IRQ_ENABLE masks."""
    cfg = read_config_env()
    clocked = Clocked(dut)
    await clocked.start()
    rmap = RegisterMap(cfg)
    cpu = WishboneCpu(dut, rmap)
    bad = rmap_holes(rmap)
    replies = await cpu.ops([WBOp(a) for a in bad] + [WBOp(bad[0], 1)])
    assert [r.ack for r in replies] == [_ERR] * (len(bad) + 1), [hex(a) for a in bad]
    cause = rmap["ERROR_CAUSE"]
    assert await cpu.reg("ERROR_CAUSE") == cause.field("BUS").mask
    await cpu.reg("CONTROL", rmap["CONTROL"].field("CLEAR_ERROR").mask)
    await cpu.reg("BATCH", cfg.acc_depth + 1)
    await cpu.reg("CONTROL", rmap["CONTROL"].field("START").mask)
    assert await cpu.reg("ERROR_CAUSE") == cause.field("BAD_BATCH").mask
    assert await cpu.reg("RUNS") == 0 and not await cpu.reg("STATUS") & 1
    # A run with the interrupt masked: DONE rises, irq stays low.
    _, prog, _ = fitting_case(np.random.default_rng(3), cfg, 0, max_m=1)
    await execute_load_async(cpu, prog)
    await cpu.reg("IRQ_ENABLE", 0)
    await cpu.reg("BATCH", 1)
    await cpu.reg("CONTROL", rmap["CONTROL"].field("START").mask)
    done = rmap["STATUS"].field("DONE").mask
    while not await cpu.reg("STATUS") & done:
        assert int(dut.irq.value) == 0
    assert int(dut.irq.value) == 0
    await cpu.reg("IRQ_ENABLE", 1)
    assert int(dut.irq.value) == 1, "irq did not follow DONE once enabled"
