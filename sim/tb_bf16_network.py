"""cocotb test bench of the bf16 accelerator core (:class:`hwgen.device.bf16_core.
BF16AcceleratorCore`, the ``accelerator`` top of a ``dtype="bf16"`` design).

Each network is compiled with :func:`hwgen.compile`, loaded through the host port over NaN in
every ACT lane, run and read back; the output must be :meth:`hwgen.nn.Bf16Network.forward`'s
bits, and after each run the device's counters the models': ``cycles``
:func:`hwgen.cycles.program_cycles` (the bf16 datapath's timing, :mod:`hwgen.bf16_cycles`),
``busy_cycles`` the rows the layers put through the array, ``macs`` those of the padded tiles.

Two tests, each run alone (the runner's ``testcase``):

- ``test_drawn_bf16_mlps``: the bf16 MLPs and inputs of ``HWGEN_BF16_CASES``, a JSON file of
  :func:`sim.bf16_runs.dense_case` data (drawn by hypothesis in
  ``tests/sim/test_tb_bf16_network.py``);
- ``test_random_bf16_graphs``: ``HWGEN_NETWORKS`` random bf16 graphs of every layer kind
  (:func:`sim.bf16_runs.bf16_graph`: convolutions, max pools, a residual add, a depthwise
  convolution, average pools, on ``HWGEN_IMAGE`` images at most, ``HWGEN_SEED``); the last
  one's weights are so large that products and sums overflow to Inf, and Inf - Inf gives NaN,
  the one before's so small that products flush to zero.

Environment: ``HWGEN_CONFIG``; ``HWGEN_BF16_CASES``; ``HWGEN_SEED``, ``HWGEN_NETWORKS``,
``HWGEN_MAX_BATCH``, ``HWGEN_IMAGE`` (``HxWxC``).
"""

import json
import os
from pathlib import Path

import cocotb
import numpy as np

import hwgen
from hwgen.compiler import CompileError
from hwgen.cycles import layer_busy_rows, program_cycles
from sim.bf16_runs import bf16_graph, bf16_rows, differing_bits, from_dense_case, run_bf16
from sim.runner import read_config_env
from sim.streams import Clocked
from sim.tb_network import HostPort

# Weight and input scales of the graphs: wide values, products and sums past bf16's range
# (Inf, Inf - Inf = NaN; mild enough that Infs survive a layer or two), products
# below fp32's normals (flushed to zero).
_SCALES = {"wide": (1.0, 1.0), "overflow": (1e12, 1e8), "flush": (2.0 ** -64, 2.0 ** -64)}


def _draw_graph(rng, cfg, index, *, scales, image, max_batch):
    """The ``index``-th random graph on at most ``image`` that fits ``cfg`` (weights and
    inputs of ``_SCALES[scales]``), its program, its input and a label."""
    for _ in range(100):
        output = ("raw", "bf16")[index % 2]
        shape = (*(int(rng.integers(min(4, v), v + 1)) for v in image[:2]),
                 int(rng.integers(1, image[2] + 1)))
        # Hidden channels up to two tiles of rows: a later convolution reads those that do
        # not fill tiles as a stream (hwgen.compiler.bf16_streams).
        channels = int(rng.integers(1, 2 * cfg.rows + 1))
        weights, inputs = _SCALES[scales]
        try:
            net = bf16_graph(int(rng.integers(1 << 16)), rows=cfg.rows, in_shape=shape,
                             channels=channels, output=output, scale=weights)
            prog = hwgen.compile(net, cfg)
        except (CompileError, ValueError):
            continue
        m = int(rng.integers(1, min(max_batch, prog.batch) + 1))
        x = bf16_rows(net, m, int(rng.integers(1 << 16)), scale=inputs)
        if scales == "overflow" and not all(_specials(net, x)[:2]):
            continue
        kinds = " ".join(_describe(layer) for layer in net.layers)
        return net, prog, x, f"graph {index} {scales} {shape} [{kinds}] {output} batch {m}"
    raise AssertionError(f"no bf16 graph on {image} fits {cfg}")


def _specials(net, x):
    """How many Infs, NaNs and zeros ``net``'s tensors hold on ``x`` (not only its output)."""
    values = np.concatenate([np.asarray(v, dtype=np.float32).ravel()
                             for v in net.forward_tensors(x).values()])
    return int(np.isinf(values).sum()), int(np.isnan(values).sum()), int((values == 0).sum())


def _describe(layer):
    """A layer's kind and geometry, e.g. ``Conv3x3x8/2p1g8`` (kernel x outputs, stride,
    padding, groups); to tell which cases a failing draw covers."""
    name = type(layer).__name__.removeprefix("Bf16")
    if name == "Conv2D":
        kh, kw, _, n = layer.weight.shape
        return (f"Conv{kh}x{kw}x{n}/{layer.strides[0]}p{max(layer.pads)}"
                + (f"g{layer.groups}" if layer.groups > 1 else ""))
    if name == "MaxPool2D":
        return f"Max{layer.size}/{layer.stride}"
    if name == "AvgPool2D":
        return "GlobalAvg" if layer.kernel_size is None else f"Avg{layer.kernel_size[0]}"
    return name


async def _check(dut, host, run, what):
    """Run ``(net, prog, x)`` through ``host``: ``net``'s bits, and the models' counters."""
    net, prog, x = run
    got = await run_bf16(host, prog, x)
    wrong = differing_bits(got, net.forward(x))
    assert wrong is None, f"{what}: {wrong}"
    counters, m = host.counters, len(x)
    model = program_cycles(prog, m)
    assert counters["cycles"] == model, f"{what}: {counters['cycles']} cycles, model {model}"
    assert counters["busy_cycles"] == sum(layer_busy_rows(d, m) for d in prog.descriptors)
    assert counters["macs"] == m * prog.padded_macs_per_row
    dut._log.info("%s: exact (%d Inf, %d NaN, %d zeros in its tensors), %d cycles (model "
                  "agrees)", what, *_specials(net, x), model)


@cocotb.test()
async def test_drawn_bf16_mlps(dut):
    """The MLPs of ``HWGEN_BF16_CASES``, bit for bit against Bf16Network.forward."""
    cfg = read_config_env()
    cases = json.loads(Path(os.environ["HWGEN_BF16_CASES"]).read_text())
    clocked = Clocked(dut)
    await clocked.start()
    host = HostPort(clocked)
    for index, case in enumerate(cases):
        net, x = from_dense_case(case, cfg.rows)
        prog = hwgen.compile(net, cfg)
        sizes = [net.input_shape[0], *(layer.weight.shape[1] for layer in net.layers)]
        output = "raw" if net.raw else "bf16"
        await _check(dut, host, (net, prog, x), f"case {index} {sizes} {output} batch {len(x)}")


@cocotb.test()
async def test_random_bf16_graphs(dut):
    """Random bf16 graphs, bit for bit against Bf16Network.forward."""
    cfg = read_config_env()
    rng = np.random.default_rng(int(os.environ.get("HWGEN_SEED", "0")))
    count = int(os.environ.get("HWGEN_NETWORKS", "4"))
    max_batch = int(os.environ.get("HWGEN_MAX_BATCH", "8"))
    image = tuple(int(v) for v in os.environ.get("HWGEN_IMAGE", "6x6x4").split("x"))
    clocked = Clocked(dut)
    await clocked.start()
    host = HostPort(clocked)
    for index in range(count):
        scales = {count - 1: "overflow", count - 2: "flush"}.get(index, "wide")
        net, prog, x, what = _draw_graph(rng, cfg, index, scales=scales, image=image,
                                         max_batch=max_batch)
        await _check(dut, host, (net, prog, x), what)
