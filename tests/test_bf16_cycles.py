"""The bf16 cycle model (:mod:`hwgen.bf16_cycles`): its numbers are the units' own, its
closed form where the datapath's batches follow each other without a gap, the controller's
leads the int8 model's. The device's counter against it: tests/device/test_bf16_core.py (the
Amaranth simulator), sim/tb_bf16_network.py (Verilator and Icarus)."""

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable
from support.accelerator_sim import ECP5, ICE40, SMALL, without_dsp

from hwgen.bf16_cycles import bf16_chunk_cycles, bf16_timing_datapath
from hwgen.config import AcceleratorConfig
from hwgen.cycles import chunk_cycles, layer_cycles
from hwgen.device.bf16_core import BF16AcceleratorCore
from hwgen.device.bf16_writeback import BF16WriteBack
from hwgen.implementation import Implementation, Registers
from hwgen.memmap import PassKind

IMPLEMENTATIONS = [None, Implementation(registers=Registers.READS), without_dsp(ECP5),
                   without_dsp(ICE40)]


def _config(rows=4, cols=4, dtype="bf16"):
    return AcceleratorConfig(dtype=dtype, rows=rows, cols=cols,
                             **{**SMALL, "spatial": False, "residual": False})


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_the_models_datapath_is_the_cores(implementation):
    config = _config()
    model = bf16_timing_datapath(config, implementation)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        core = BF16AcceleratorCore(config, implementation).datapath
        numbers = [(dp.rows, dp.latency, dp.row_interval, dp.engine.rewrite_wait,
                    dp._bias_latency) for dp in (model, core)]
        del core
        gc.collect()
    assert numbers[0] == numbers[1]


@pytest.mark.parametrize(("rows", "cols"), [(4, 4), (2, 2), (8, 2), (1, 1)])
@pytest.mark.parametrize(("k_tiles", "n_tiles"), [(1, 1), (3, 2), (2, 5)])
def test_batches_without_gaps_take_a_cycle_a_row(rows, cols, k_tiles, n_tiles):
    # From max(row_interval, rows + rewrite_wait - 1) rows on, the chunk is its first weight
    # tile, then one row a cycle, then the last row's way out.
    config = _config(rows, cols)
    dp = bf16_timing_datapath(config)
    m = max(dp.row_interval, rows + dp.engine.rewrite_wait - 1)
    out = dp.latency + BF16WriteBack.STAGES + BF16AcceleratorCore.LAYER_END
    for raw in (False, True):
        assert (bf16_chunk_cycles(config, k_tiles, n_tiles, m, raw)
                == rows + n_tiles * k_tiles * m + out)


def test_fewer_rows_than_the_row_interval_wait_between_reduction_tiles():
    # One row: each later reduction tile waits row_interval cycles (or the engine's bank).
    config = _config(2, 2)
    dp = bf16_timing_datapath(config)
    one, three = (bf16_chunk_cycles(config, k, 1, 1, True) for k in (1, 3))
    assert three - one >= 2 * dp.row_interval
    assert three - one == dp.entry_cycles([1], 3, 1)[-1] - dp.entry_cycles([1], 1, 1)[-1]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_a_layer_is_the_int8_controllers_leads_around_bf16_chunks(implementation):
    # The same descriptor on both dtypes: the leads agree, the chunks are each dtype's.
    d = {"kind": PassKind.MATRIX, "k_tiles": 3, "n_tiles": 2, "raw": 1, "spatial": 0}
    bf16, int8 = _config(), _config(dtype="int8")
    for m in (1, 5, 16):
        bf16_lead = (layer_cycles(bf16, d, m, implementation=implementation)
                     - bf16_chunk_cycles(bf16, 3, 2, m, True, implementation=implementation))
        int8_lead = (layer_cycles(int8, d, m, implementation=implementation)
                     - chunk_cycles(int8, 3, 2, m, True, implementation=implementation))
        assert bf16_lead == int8_lead
        assert layer_cycles(bf16, d, m) != layer_cycles(int8, d, m)


def test_the_model_leaves_no_unused_elaboratable_warning(monkeypatch):
    # Amaranth stays quiet about unused elaboratables until a design is elaborated; a test
    # session has elaborated many, and the model's units are never elaborated.
    monkeypatch.setattr(UnusedElaboratable, "_MustUse__silence", False)
    bf16_timing_datapath.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bf16_chunk_cycles(_config(3, 3), 2, 2, 4, False)
        bf16_timing_datapath.cache_clear()
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, UnusedElaboratable)]
