"""The memory map: the host port's MAC count by a constant without a multiplier."""

from amaranth.sim import Simulator


def test_times_constant_without_a_multiplier():
    from amaranth.hdl import Module, Signal

    from hwgen.memmap import _times_constant

    constants = [1, 2, 3, 5, 6, 7, 11, 48, 63, 64, 255, 12289, 4095 * 4095]
    m = Module()
    value = Signal(64)
    outs = {c: Signal(64, name=f"x{c}") for c in constants}
    m.d.comb += [o.eq(_times_constant(value, c)) for c, o in outs.items()]
    sim = Simulator(m)
    seen = []

    async def bench(ctx):
        for v in (0, 1, 0x1234_5678_9ABC, (1 << 64) - 1):
            ctx.set(value, v)
            for c, o in outs.items():
                seen.append((v, c, ctx.get(o)))

    sim.add_testbench(bench)
    sim.run()
    assert seen and all(got == (v * c) % (1 << 64) for v, c, got in seen), seen
