"""host.plan: the load/run/read loop as data, carried out by its sync and async executors on a
port over the program interpreter, against :meth:`hwgen.nn.QuantizedNetwork.forward`."""

import asyncio

import numpy as np
import pytest
from support import BOARD_WS as CONFIG

import hwgen
from host.plan import (
    execute_load,
    execute_load_async,
    execute_run,
    execute_run_async,
    load_plan,
    run_plans,
)
from hwgen.memmap import Region
from sim.interpreter import ProgramInterpreter
from sim.netgen import random_input, random_network


class InterpreterPort:
    """``write``/``run``/``read`` straight on the interpreter's memories; records the calls."""

    def __init__(self, config):
        self.device = ProgramInterpreter(config)
        self.calls = []

    def write(self, region, base, words):
        self.calls.append(("write", region, base, len(words)))
        for i, word in enumerate(words):
            self.device.write(region, base + i, int(word))

    def run(self, batch):
        self.calls.append(("run", batch))
        self.device.run(batch)

    def read(self, region, base, count):
        self.calls.append(("read", region, base, count))
        return [self.device.read(region, base + i) for i in range(count)]


class AsyncPort:
    def __init__(self, port):
        self.port = port

    async def write(self, *args):
        self.port.write(*args)

    async def run(self, batch):
        self.port.run(batch)

    async def read(self, *args):
        return self.port.read(*args)


def network(seed, readout=False):
    net = random_network(np.random.default_rng(seed), CONFIG, widths=[9, 7, 5])
    return net, hwgen.compile(net, CONFIG, batch=4, readout=readout)


def test_a_load_writes_each_image_at_its_base():
    _, program = network(1)
    writes = load_plan(program)
    assert [(w.region, w.base, len(w.words)) for w in writes] == [
        (region, base, len(words)) for region, (base, words) in program.images.items()
        if len(words)]
    assert {w.region for w in writes} >= {Region.PROGRAM, Region.WEIGHT, Region.PARAM}


def test_runs_cover_the_rows_in_chunks_of_the_batch():
    _, program = network(2)
    x = random_input(np.random.default_rng(0), CONFIG, 10, 9)
    plans = list(run_plans(program, x))
    assert [(p.start, p.stop, p.batch) for p in plans] == [(0, 4, 4), (4, 8, 4), (8, 10, 2)]
    for plan in plans:
        assert plan.write.region == Region.ACT and plan.write.base == program.input.base
        np.testing.assert_array_equal(plan.write.words,
                                      program.pack_input(x[plan.start:plan.stop]))
        assert [tuple(r) for r in plan.reads] == [program.output_words(plan.batch)]
    assert list(run_plans(program, x[:0])) == []


@pytest.mark.parametrize("outputs", ["last", "all"])
def test_sync_and_async_executors_give_the_reference(outputs):
    net, program = network(3, readout=True)
    x = random_input(np.random.default_rng(1), CONFIG, 10, 9)
    expected = net.forward_trace(x) if outputs == "all" else [net.forward(x)]
    port = InterpreterPort(CONFIG)
    execute_load(port, program)
    got = [execute_run(port, plan) for plan in run_plans(program, x, outputs)]
    for index, want in enumerate(expected):
        np.testing.assert_array_equal(np.concatenate([g[index] for g in got]), want)
    assert [c for c in port.calls if c[0] == "run"] == [("run", 4), ("run", 4), ("run", 2)]

    async def bench():
        aport = AsyncPort(InterpreterPort(CONFIG))
        await execute_load_async(aport, program)
        return [await execute_run_async(aport, plan) for plan in run_plans(program, x, outputs)]

    again = asyncio.run(bench())
    for a, b in zip(got, again, strict=True):
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v)


def test_outputs_all_of_a_program_without_readout_is_refused():
    _, program = network(4)
    with pytest.raises(ValueError, match=r"compile it with hwgen\.compile"):
        list(run_plans(program, np.zeros((1, 9), dtype=np.int64), "all"))
