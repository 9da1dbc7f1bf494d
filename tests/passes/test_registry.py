"""The pass kinds' registry (hwgen.passes): every PassKind has a module with every hook, the
compiler, the cycle model and the interpreter find a kind through it alone, and the
interpreter's steps stay independent of the compiler they check."""

import dataclasses
import inspect
import subprocess
import sys
import types

import numpy as np
import pytest
from support import COMPILER_CONFIGS as CONFIGS

from hwgen import passes
from hwgen.compiler import compile_network
from hwgen.cycles import layer_cycles, program_cycles
from hwgen.memmap import PassKind, descriptor_layout
from hwgen.nn import (
    Add,
    AvgPool2D,
    Conv2D,
    Dense,
    Flatten,
    GlobalAvgPool2D,
    MaxPool2D,
    QuantizedNetwork,
)
from hwgen.passes.base import Pass
from hwgen.passes.maxpool import MaxPoolPass
from sim.interpreter import run_on_interpreter
from sim.netgen import random_cnn, random_graph, random_image


@pytest.mark.parametrize("kind", list(PassKind), ids=lambda k: k.name)
def test_every_pass_kind_has_a_module_with_every_hook(kind):
    found = passes.lookup(kind)
    assert isinstance(found, Pass) and found.kind is kind
    assert passes.lookup(kind.value) is found     # a descriptor's field finds it too
    assert not type(found).__abstractmethods__    # every hook of the base class is defined
    assert found.layers and all(isinstance(t, type) for t in found.layers)
    assert set(found.cycle_fields) <= set(descriptor_layout(CONFIGS["8x8"]).members)
    if type(found).accepts is Pass.accepts:
        assert all(passes.for_layer(object.__new__(t)) is found for t in found.layers)
    else:   # a kind that takes some of its layers' types, where the device can
        assert all(passes.for_layer(object.__new__(t)) is not found for t in found.layers)


def test_a_kind_without_a_module_is_refused_naming_the_registered_ones():
    with pytest.raises(ValueError) as info:
        passes.lookup(7)
    assert "7" in str(info.value) and \
        "allowed: MATRIX (0), MAXPOOL (1), ADD (2), DEPTHWISE (3)" in str(info.value)
    assert passes.for_layer(Flatten()) is None   # a Flatten is no pass
    assert passes.layer_types() == (Dense, Conv2D, AvgPool2D, GlobalAvgPool2D, MaxPool2D,
                                    Add)


class MinPool2D(MaxPool2D):
    """A layer no kind of the device lowers: the minimum of each window."""

    def forward(self, x):
        return np.asarray(self.windows(np.asarray(x)).min(axis=(4, 5)))


class MinPoolPass(MaxPoolPass):
    """A pass kind of its own, registered in place of max pooling: it lowers MinPool2D,
    counts 100 cycles more than a max-pooling pass, and interprets as the minimum; it records
    the hooks it was asked for."""

    layers = (MinPool2D,)

    def __init__(self):
        self.asked = set()
        for name in Pass.__abstractmethods__:
            setattr(self, name, self._recorded(name, getattr(self, name)))

    def _recorded(self, name, hook):
        def recorded(*args, **kwargs):
            self.asked.add(name)
            return hook(*args, **kwargs)
        return recorded

    @staticmethod
    def combine(lanes):
        return lanes.min(axis=1)


def _min_pool_network(config):
    rng = np.random.default_rng(3)
    conv = Conv2D(rng.integers(-3, 4, (3, 3, 2, 5)), rng.integers(-99, 99, 5),
                  np.full(5, 3), np.full(5, 4), padding=1, activation="identity")
    dense = Dense(rng.integers(-3, 4, (2 * 2 * 5, 3)), np.zeros(3, int), np.ones(3, int),
                  np.zeros(3, int), output="raw")
    return QuantizedNetwork([conv, MinPool2D(3, 2), Flatten(), dense], input_shape=(5, 5, 2),
                            acc_bits=config.acc_bits)


def test_a_kind_registered_is_all_the_compiler_cycles_and_interpreter_need(monkeypatch):
    config = dataclasses.replace(CONFIGS["3x2"], prog_depth=32)
    net = _min_pool_network(config)
    x = random_image(np.random.default_rng(4), config, 3, net.input_shape)
    maxed = QuantizedNetwork([MaxPool2D(3, 2) if isinstance(layer, MinPool2D) else layer
                              for layer in net.layers], input_shape=net.input_shape,
                             acc_bits=config.acc_bits)
    assert not np.array_equal(net.forward(x), maxed.forward(x))
    spy = MinPoolPass()
    monkeypatch.setitem(passes.registry(), PassKind.MAXPOOL, spy)
    program = compile_network(net, config)
    interpreted, unpacked = run_on_interpreter(program, x, out_shape=net.output_shape)
    np.testing.assert_array_equal(interpreted, net.forward(x))
    np.testing.assert_array_equal(unpacked, net.forward(x))
    before = [layer_cycles(config, d, 3) for d in program.descriptors]
    assert spy.asked == Pass.__abstractmethods__ - {"busy_rows", "output_rows"}
    # The count is the registered kind's: here 100 more than max pooling's per pooling pass.
    monkeypatch.setattr(spy, "cycles",
                        lambda *args, **kwargs: MaxPoolPass().cycles(*args, **kwargs) + 100)
    after = [layer_cycles(config, d, 3) for d in program.descriptors]
    assert [b - a for a, b in zip(before, after, strict=True)] == \
        [100 * (d["kind"] == PassKind.MAXPOOL.value) for d in program.descriptors]


def _reachable(function, cls):
    """Yield the functions ``function`` calls by a global name of its module or as a method
    of ``cls``, itself included, and the global objects it names."""
    seen, todo = set(), [function]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        yield f, None
        codes = [f.__code__]
        while codes:
            code = codes.pop()
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            for name in code.co_names:
                found = f.__globals__.get(name, getattr(cls, name, None))
                if inspect.isfunction(found) and found.__module__ == cls.__module__:
                    todo.append(found)
                elif found is not None:
                    yield None, found


@pytest.mark.parametrize("kind", list(PassKind), ids=lambda k: k.name)
def test_interpreter_steps_use_no_compiler_code(kind):
    # The interpreter is the oracle of the compiler's layout: a step that called the
    # compiler's lowering or images would check the compiler against itself.
    cls = type(passes.lookup(kind))
    for hook in ("interpret", "output_rows"):
        for _, used in _reachable(getattr(cls, hook), cls):
            module = getattr(used, "__module__", None) or getattr(used, "__name__", "")
            assert not module.startswith(("hwgen.compiler", "hwgen.nn")), (hook, used)


def test_the_cycle_fields_are_all_a_kind_s_cycle_model_reads():
    # The sweep caches counts by them (hwgen.dse.points): any other descriptor field, changed,
    # leaves every layer's count alone.
    # Columns for each row: the depthwise unit takes the depthwise convolutions.
    config = dataclasses.replace(CONFIGS["3x2"], rows=2, cols=3, prog_depth=64, depthwise=True)
    rng = np.random.default_rng(8)
    seen = set()
    draw = 0
    while seen != set(PassKind):
        # CNNs for the matrix and pooling passes, graphs for the adds.
        draw += 1
        net = (random_cnn(rng, config, max_channels=6) if draw % 2 else
               random_graph(rng, config, images=bool(draw % 4), max_channels=6))
        program = compile_network(net, config)
        for d in program.descriptors:
            kind = passes.lookup(d["kind"])
            seen.add(kind.kind)
            kept = {"kind", "spatial", "geometry", *kind.cycle_fields}
            changed = {name: (value if name in kept else int(rng.integers(0, 99)))
                       for name, value in d.items()}
            assert layer_cycles(config, changed, 5) == layer_cycles(config, d, 5)
        assert program_cycles(program, 5) == sum(layer_cycles(config, d, 5)
                                                 for d in program.descriptors)


@pytest.mark.parametrize("first", ["hwgen.passes", "hwgen.passes.matrix", "hwgen.cycles",
                                   "hwgen.compiler", "hwgen.compiler.proofs", "sim.interpreter",
                                   "hwgen.device.accelerator"])
def test_any_module_imports_first(first):
    # The kinds' modules use the compiler, which asks the registry: whichever comes first,
    # both load and the registry finds every kind.
    code = (f"import {first}; from hwgen import passes; from hwgen.memmap import PassKind; "
            "assert set(passes.registry()) == set(PassKind)")
    subprocess.run([sys.executable, "-c", code], check=True)
