"""The trained model's file (hwgen.train.checkpoint): a program file that also holds the float
model and the scales; loading gives the same network, and refuses what is not such a file."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from support import COMPILER_CONFIGS

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, Program, compile_network
from hwgen.nn import MLP, digits_cnn
from hwgen.train import ActivationScales, Bf16Trainer, Trainer, load_trained, save_trained
from hwgen.train.layers import quantize_model

CONFIG = COMPILER_CONFIGS["3x2"]


@pytest.fixture
def trained(interpreted):
    rng = np.random.default_rng(0)
    x, y = rng.random((40, 64)), rng.integers(0, 10, size=40)
    trainer = Trainer(MLP([64, 8, 10], seed=3), CONFIG, interpreted(CONFIG, 2))
    trainer.fit(x, y, epochs=1, batch_size=20)
    return trainer, x


def test_round_trip(trained, tmp_path):
    trainer, x = trained
    path = tmp_path / "digits.npz"
    program = save_trained(path, trainer)
    loaded = load_trained(path)
    assert loaded.program == program == Program.load(path)  # a program file as it is
    assert loaded.config == CONFIG
    assert loaded.scales.to_dict() == trainer.scales.to_dict()
    assert loaded.history == [r.to_dict() for r in trainer.history]
    for (w, b), (w0, b0) in zip(loaded.model.layers, trainer.model.layers, strict=True):
        np.testing.assert_array_equal(w, w0)
        np.testing.assert_array_equal(b, b0)
    x_q = trainer.network().quantize_input(x)
    np.testing.assert_array_equal(loaded.network.forward(x_q), trainer.network().forward(x_q))


def test_bf16_round_trip(interpreted, tmp_path):
    # A bf16 training saves its fp32 master weights and the program of their bf16 network.
    config = AcceleratorConfig(dtype="bf16", rows=3, cols=2)
    rng = np.random.default_rng(1)
    x, y = rng.random((30, 64)), rng.integers(0, 10, size=30)
    devices = interpreted(config, 1)
    trainer = Bf16Trainer(MLP([64, 8, 10], seed=3), config, devices)
    trainer.fit(x, y, epochs=1, batch_size=15)
    path = tmp_path / "bf16.npz"
    program = save_trained(path, trainer)
    loaded = load_trained(path)
    assert loaded.program == program == Program.load(path)
    assert loaded.config == config and loaded.scales is None
    for (w, b), (w0, b0) in zip(loaded.model.layers, trainer.model.layers, strict=True):
        np.testing.assert_array_equal(w, w0)
        np.testing.assert_array_equal(b, b0)
    x_b = loaded.network.quantize_input(x)
    devices[0].load(path)
    scores = devices[0].infer(x_b)
    np.testing.assert_array_equal(scores.view(np.uint32),
                                  trainer.network().forward(x_b).view(np.uint32))


def test_cnn_round_trip(tmp_path):
    model = digits_cnn(seed=1)
    scales = ActivationScales.calibrate(model.layers,
                                        np.random.default_rng(1).random((5, 8, 8, 1)), 8)
    trainer = SimpleNamespace(model=model, layers=model.layers, input_shape=model.input_shape,
                              config=CONFIG, history=[], scales=scales,
                              network=lambda: quantize_model(model.layers, scales, CONFIG,
                                                             model.input_shape))
    try:
        compile_network(trainer.network(), CONFIG)
    except CompileError:  # convolutions do not compile yet: saving says so
        with pytest.raises(CompileError, match="Conv2D"):
            save_trained(tmp_path / "cnn.npz", trainer)
        return
    save_trained(tmp_path / "cnn.npz", trainer)
    loaded = load_trained(tmp_path / "cnn.npz")
    assert [type(a) for a in loaded.model.layers] == [type(a) for a in model.layers]
    x = trainer.network().quantize_input(np.random.default_rng(2).random((3, 8, 8, 1)))
    np.testing.assert_array_equal(loaded.network.forward(x), trainer.network().forward(x))


def test_a_plain_program_file_is_refused(trained, tmp_path):
    trainer, _ = trained
    path = tmp_path / "plain.npz"
    Program.load(_saved(trainer, tmp_path)).save(path)
    with pytest.raises(ValueError, match=r"without its trained model.*hwgen train --out"):
        load_trained(path)


def _saved(trainer, tmp_path):
    path = tmp_path / "full.npz"
    save_trained(path, trainer)
    return path


def test_damaged_metadata_is_refused(trained, tmp_path):
    trainer, _ = trained
    path = _saved(trainer, tmp_path)
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta = json.loads(arrays["trained_meta"].tobytes())
    meta["version"] = 99
    arrays["trained_meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(ValueError, match=r"trained model is damaged.*version 99"):
        load_trained(path)
    del arrays["trained_weight0"]
    meta["version"] = 1
    arrays["trained_meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(ValueError, match=r"damaged.*trained_weight0"):
        load_trained(path)


def test_needs_a_calibrated_trainer(interpreted, tmp_path):
    trainer = Trainer(MLP([64, 8, 10]), CONFIG, interpreted(CONFIG, 1))
    with pytest.raises(RuntimeError, match="not calibrated"):
        save_trained(tmp_path / "x.npz", trainer)
    assert not (tmp_path / "x.npz").exists()
