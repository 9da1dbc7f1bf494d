"""hwgen.dse.points: one point's evaluation, every status, and the figures it records.

The expected figures come from the library functions called directly on the configuration the
point describes (the board's preset merged with the point's values): the fit estimate, the
compiled program, :func:`hwgen.cycles.program_cycles` and :func:`hwgen.throughput.link_bound_rate`.
"""

import re
import signal
import threading

import numpy as np
import pytest

import hwgen
from hwgen.boards import BOARDS, board_config, estimate
from hwgen.config import AcceleratorConfig
from hwgen.cycles import program_cycles
from hwgen.dse.model import FloatModel, IntegerModel
from hwgen.dse.points import (
    STATUSES,
    _cycle_key,
    _program_cycles,
    dask_setup,
    evaluate_point,
    evaluate_points,
)
from hwgen.nn import MLP, quantize, to_bf16
from hwgen.throughput import link_bound_rate
from sim.netgen import random_network

BOARD = BOARDS["icebreaker"]
BAUD = 1_000_000


@pytest.fixture(scope="module")
def model():
    mlp = MLP([16, 8, 4], seed=2)
    return FloatModel(mlp, np.random.default_rng(1).normal(size=(50, 16)), label="tiny")


def _expected(model, values, baud=BAUD):
    fields = dict(values)
    config = board_config(BOARD, clock_hz=fields.pop("clock_hz", None), **fields)
    program = hwgen.compile(model.network(config.in_bits, config.w_bits, config.acc_bits,
                                          config.mult_bits), config)
    cycles = program_cycles(program, program.batch, BOARD.implementation)
    return config, program, cycles


@pytest.mark.parametrize("values", [
    {"rows": 2, "cols": 2},
    {"rows": 2, "cols": 2, "post_lanes": None, "clock_hz": 24_000_000},
    {"rows": 3, "cols": 1, "dataflow": "os", "acc_depth": 32},
])
def test_an_ok_point_records_the_library_figures(model, values):
    row = evaluate_point(BOARD, model, "estimate", values, key="k", baud=BAUD)
    assert (row["status"], row["reason"]) == ("ok", "")
    config, program, cycles = _expected(model, values)
    assert {f: row[f] for f in config.to_dict()} == config.to_dict()
    assert (row["name"], row["config_hash"], row["point"]) == (config.name, config.hash, "k")
    est = estimate(BOARD, config)
    assert [row[f"est_{r}"] for r in ("lut", "ff", "dsp", "bram")] == \
        [est[r] for r in ("lut", "ff", "dsp", "bram")]
    assert (row["batch"], row["cycles_per_run"]) == (program.batch, cycles)
    device = config.clock_hz * program.batch / cycles
    # The wire the iCEBreaker builds: words, the next WRITEs behind the READs (1 KiB FIFO).
    link = link_bound_rate(program, BAUD, packed=False, rx_fifo=1024)
    assert row["clock_mhz"] == config.clock_hz / 1e6
    assert row["device_infer_per_s"] == pytest.approx(device, abs=0.06)
    assert row["link_infer_per_s"] == pytest.approx(link, abs=0.06)
    assert row["infer_per_s"] == pytest.approx(min(device, link), abs=0.06)
    assert "lut" not in row and "fmax_mhz" not in row   # the build tier's columns
    assert row["_extra"] == {}


@pytest.mark.parametrize(("values", "status", "reason"), [
    ({"rows": 0}, "invalid", r"rows=0 is out of range; allowed: 1\.\.64"),
    ({"post_lanes": 3}, "invalid", r"post_lanes=3 does not divide cols=4; allowed: 1, 2, 4"),
    ({"dataflow": "xs"}, "invalid", r"dataflow='xs' is not supported; allowed: 'ws', 'os'"),
    ({"clock_hz": 13_000_000}, "no-clock", r"cannot make 13 MHz exactly"),
    ({"rows": 8, "cols": 8}, "no-fit", r"needs 32 SB_MAC16 DSPs, the device has 8"),
    ({"rows": 2, "cols": 2, "weight_depth": 16}, "no-compile",
     r"weight words do not fit: layers 0\.\.0 need 64 words; limit weight_depth=16"),
])
def test_a_failing_point_records_its_reason(model, values, status, reason):
    row = evaluate_point(BOARD, model, "estimate", values, baud=BAUD)
    assert row["status"] == status
    assert row["status"] in STATUSES
    assert row["reason"] and "\n" not in row["reason"]
    assert re.search(reason, row["reason"]), row["reason"]
    assert re.search(reason, row["_extra"]["detail"])
    for field, value in values.items():   # the values given are kept, even when invalid
        assert row[field] == value


def test_a_point_that_does_not_fit_is_still_timed(model):
    values = {"rows": 8, "cols": 8}
    row = evaluate_point(BOARD, model, "estimate", values, baud=BAUD)
    _, program, cycles = _expected(model, values)
    assert row["status"] == "no-fit"
    assert (row["batch"], row["cycles_per_run"]) == (program.batch, cycles)
    assert row["est_dsp"] == 32


def test_an_integer_model_fails_points_of_other_operand_widths():
    config = board_config(BOARD, rows=2, cols=2)
    net = random_network(np.random.default_rng(0), config, widths=[10, 6, 3])
    model = IntegerModel(net, label="saved.npz", digest="0" * 16)
    assert evaluate_point(BOARD, model, "estimate", {"rows": 2, "cols": 2},
                          baud=BAUD)["status"] == "ok"
    row = evaluate_point(BOARD, model, "estimate", {"rows": 2, "cols": 2, "in_bits": 6},
                         baud=BAUD)
    assert row["status"] == "no-compile"
    assert "saved.npz is an integer network of in_bits=8, w_bits=8; this point has " \
           "in_bits=6" in row["reason"]


def test_an_unexpected_exception_is_the_points_error_not_the_sweeps(model):
    row = evaluate_point(BOARD, model, "bogus", {"rows": 2}, baud=BAUD)
    assert row["status"] == "error"
    assert row["reason"] == "ValueError: tier='bogus'; allowed: estimate, build"
    assert "Traceback" in row["_extra"]["detail"]


def test_evaluate_points_keeps_the_order_and_the_keys(model):
    # One row makes the descriptor's k_tiles wider: with the preset's 1,024 weight words a
    # fifth PROGRAM block RAM (31 of 30), with 256 it fits.
    pts = [("a", {"rows": 1, "weight_depth": 256}), ("b", {"rows": 0}),
           ("c", {"rows": 2, "cols": 2})]
    rows = evaluate_points("icebreaker", model, "estimate", pts, baud=BAUD)
    assert [(r["point"], r["rows"]) for r in rows] == [("a", 1), ("b", 0), ("c", 2)]
    assert [r["status"] for r in rows] == ["ok", "invalid", "ok"]
    assert all(r["board"] == "icebreaker" and r["model"] == "tiny" for r in rows)


@pytest.mark.parametrize("seed", range(6))
def test_the_cycle_cache_key_holds_what_the_cycle_model_reads(seed):
    # Designs alike in the key's fields, and different in every other, count alike; and the
    # cached count is the model's, for the plain implementation and the boards'.
    rng = np.random.default_rng(seed)
    base = AcceleratorConfig(rows=int(rng.integers(1, 6)), cols=int(rng.integers(2, 7)),
                             dataflow=str(rng.choice(["ws", "os"])))
    net = random_network(rng, base, max_width=30)
    lanes = [d for d in range(1, base.cols + 1) if base.cols % d == 0] \
        if base.dataflow == "ws" else [base.cols]
    implementations = [None, BOARDS["icebreaker"].implementation,
                       BOARDS["ulx3s-85f"].implementation]
    cases = []
    for _ in range(6):
        config = AcceleratorConfig(**{
            **base.to_dict(), "post_lanes": int(rng.choice(lanes)),
            "acc_bits": int(rng.integers(32, 48)),
            "mult_bits": int(rng.integers(16, 24)), "act_depth": int(rng.integers(512, 4096)),
            "weight_depth": int(rng.integers(1024, 4096)), "out_depth": 1024,
            "acc_depth": 32, "param_depth": 256, "clock_hz": int(rng.integers(1, 100)) * 10**6,
            "prog_depth": int(rng.integers(4, 17))})
        program = hwgen.compile(net, config, batch=int(rng.integers(1, 33)))
        cases.append((program, implementations[int(rng.integers(0, 3))]))
    for a, impl_a in cases:
        for b, impl_b in cases:
            for m in (1, min(a.batch, b.batch)):
                if _cycle_key(a, m, impl_a) == _cycle_key(b, m, impl_b):
                    assert program_cycles(a, m, impl_a) == program_cycles(b, m, impl_b)
        for _ in range(2):   # computed, then from the cache
            assert _program_cycles(a, a.batch, impl_a) == program_cycles(a, a.batch, impl_a)


def test_the_cycle_cache_tells_the_dtypes_apart():
    # The same layers' tiles on an int8 and a bf16 design: the int8 count first in the cache,
    # then the bf16 one must be the bf16 model's.
    sizes, m = [7, 9, 5], 3
    shape = {"rows": 4, "cols": 4, "spatial": False, "residual": False}
    mlp = MLP(sizes, seed=1)
    int8 = hwgen.compile(quantize(mlp, np.random.default_rng(1).normal(size=(32, 7))),
                         AcceleratorConfig(**shape))
    bf16 = hwgen.compile(to_bf16(mlp, rows=4), AcceleratorConfig(dtype="bf16", **shape))
    assert [[d[k] for k in ("k_tiles", "n_tiles", "raw")] for d in int8.descriptors] == \
        [[d[k] for k in ("k_tiles", "n_tiles", "raw")] for d in bf16.descriptors]
    assert _program_cycles(int8, m) == program_cycles(int8, m)
    assert _program_cycles(bf16, m) == program_cycles(bf16, m) != program_cycles(int8, m)


def test_dask_setup_leaves_ctrl_c_to_the_sweep():
    before = signal.getsignal(signal.SIGINT)
    try:
        dask_setup(None)
        handler = signal.getsignal(signal.SIGINT)
        assert callable(handler) and handler not in (signal.SIG_IGN, signal.SIG_DFL, before)
        signal.raise_signal(signal.SIGINT)   # no KeyboardInterrupt
    finally:
        signal.signal(signal.SIGINT, before)
    # Off the main thread it changes nothing (signal handlers belong to the main thread).
    thread = threading.Thread(target=dask_setup, args=(None,))
    thread.start()
    thread.join()
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.parametrize(("clock_hz", "rate"), [(12_000_000, 3_000_000),
                                                (24_000_000, 6_000_000)])
def test_a_point_without_a_rate_takes_the_boards(model, clock_hz, rate):
    """With no rate given, a point's link bound is at the rate ``hwgen build`` takes: the
    FT2232H's 6 Mbaud where the clock makes it (4 cycles a bit of 24 MHz), else 3 Mbaud (the
    12 MHz oscillator cannot make 6)."""
    values = {"rows": 2, "cols": 2, "clock_hz": clock_hz}
    row = evaluate_point(BOARD, model, "estimate", values, baud=None)
    assert row["status"] == "ok", row["reason"]
    _, program, _ = _expected(model, values)
    assert row["baud"] == rate
    assert row["link_infer_per_s"] == pytest.approx(
        link_bound_rate(program, rate, packed=False, rx_fifo=1024), abs=0.06)
    assert row["link_infer_per_s"] > evaluate_point(BOARD, model, "estimate", values,
                                                    baud=BAUD)["link_infer_per_s"]
