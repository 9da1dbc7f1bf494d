# amaranth: UnusedElaboratable=no
"""The pass units' starts (PassStarts): each a register of the controller's next pulse and the
decode of the next kind, so that a unit starts in the cycle the controller's own register
would, only while its kind runs; a group starts with any of its units. (The first line turns
off Amaranth's UnusedElaboratable warning for this file: its arbiters only decode.)"""

import random

from amaranth.sim import Simulator

from hwgen import AcceleratorConfig
from hwgen.device.bank_arbiter import BankArbiter
from hwgen.device.pass_starts import PassStarts
from hwgen.memmap import PassKind

UNITS = {"matrix": (PassKind.MATRIX,), "pool": (PassKind.MAXPOOL,),
         "depthwise": (PassKind.DEPTHWISE,)}


def _unit(kind):
    """The unit the model grants ``kind`` (the first unit runs what no other claims)."""
    return next((name for name, kinds in UNITS.items() if kind in kinds), "matrix")


def test_starts_follow_the_next_kind_a_cycle_later():
    arbiter = BankArbiter(AcceleratorConfig(depthwise=True), UNITS, registered=True)
    dut = PassStarts(arbiter, {"array": ("matrix", "depthwise")})
    rng = random.Random(3)
    kinds = list(PassKind)

    async def bench(ctx):
        now = "matrix"      # out of reset
        for _ in range(300):
            kind = rng.choice(kinds)
            pulses = {name: rng.random() < 0.3 for name in ("prime", "start_layer", "start_chunk")}
            ctx.set(dut.kind_next, kind)
            for name, value in pulses.items():
                ctx.set(getattr(dut, f"{name}_next"), value)
            await ctx.tick()
            decoded = _unit(kind)
            for unit in (*UNITS, "array"):
                members = ("matrix", "depthwise") if unit == "array" else (unit,)
                here, coming = now in members, decoded in members
                assert ctx.get(getattr(dut, f"prime_{unit}")) == (pulses["prime"] and here)
                assert ctx.get(getattr(dut, f"start_{unit}")) == (pulses["start_layer"]
                                                                  and coming)
                assert ctx.get(getattr(dut, f"begin_{unit}")) == (
                    (pulses["start_layer"] and coming) or (pulses["start_chunk"] and here))
            now = decoded
            assert [ctx.get(getattr(dut, f"now_{u}")) for u in UNITS] == \
                [u == now for u in UNITS]

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_a_group_names_units_the_arbiter_has(refused):
    arbiter = BankArbiter(AcceleratorConfig(), {"matrix": (PassKind.MATRIX,)})
    refused("group 'array' of units .*'depthwise'.*; allowed: a new name, of units among "
            "matrix", lambda: PassStarts(arbiter, {"array": ("matrix", "depthwise")}))
