"""hwgen.compile_for: a float model quantized with the design's widths and compiled in one
call, equal to quantize(..., widths) then hwgen.compile."""

import numpy as np
import pytest

import hwgen
from hwgen.boards import BOARDS, board_config
from hwgen.compiler import CompileError, design_widths
from hwgen.nn import MLP, quantize


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 20))
    mlp = MLP([20, 12, 5], seed=1).fit(x, rng.integers(0, 5, 40), epochs=3, seed=1)
    return mlp, x


def test_widths_follow_the_design(model):
    mlp, x = model
    config = board_config(BOARDS["icebreaker"])      # acc_bits 22, mult_bits 8
    net, program = hwgen.compile_for(mlp, config, x)
    assert design_widths(config) == {"in_bits": 8, "w_bits": 8, "acc_bits": 22,
                                     "mult_bits": 8}
    assert (net.in_bits, net.w_bits, net.acc_bits, net.mult_bits) == (8, 8, 22, 8)
    expected = quantize(mlp, x, in_bits=8, w_bits=8, acc_bits=22, mult_bits=8)
    assert program.images == hwgen.compile(expected, config).images
    # quantize's default widths (acc_bits 32) do not fit that design: what compile_for avoids.
    with pytest.raises(CompileError, match="acc_bits"):
        hwgen.compile(quantize(mlp, x), config)


def test_refusals_say_what_is_allowed(model):
    mlp, x = model
    config = hwgen.AcceleratorConfig()
    with pytest.raises(ValueError, match=r"a float model needs calibration inputs .*"
                                         r"shape \(M, 20\)"):
        hwgen.compile_for(mlp, config)
    net, _ = hwgen.compile_for(mlp, config, x)
    with pytest.raises(ValueError, match="already quantized"):
        hwgen.compile_for(net, config, x)
    assert hwgen.compile_for(net, config).program.images == hwgen.compile(net, config).images
    with pytest.raises(TypeError, match=r"model is a str; allowed: hwgen\.nn\.MLP, CNN"):
        hwgen.compile_for("model.onnx", config, x)
    with pytest.raises(TypeError, match=r"hwgen\.compile_for\(model, config, calibration\) "):
        hwgen.compile(mlp, config)
