"""``hwgen infer --output-mode argmax|top_k --k K`` on an in-process device over TCP: the
classes NumPy gives of hwgen.nn's scores, and one-line errors for bad combinations."""

import dataclasses

import numpy as np
import pytest
from support import BOARD_WS
from support.tcp_device import TcpDevice

import hwgen
from hwgen.cli import main
from sim.netgen import random_input, random_network


@pytest.fixture(scope="module")
def device():
    with TcpDevice(BOARD_WS) as d:
        yield d


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(3)
    net = random_network(rng, BOARD_WS, widths=[10, 6, 5], raw=True)
    hwgen.compile(net, BOARD_WS, batch=6).save(tmp_path / "p.npz")
    x = random_input(rng, BOARD_WS, 15, 10)
    np.save(tmp_path / "x.npy", x)
    return tmp_path, net.forward(x)


def _infer(device, tmp_path, *options):
    return main(["infer", "--url", device.url, "--program", str(tmp_path / "p.npz"),
                 "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"),
                 *options])


def test_argmax_and_top_k(device, files):
    tmp_path, scores = files
    assert _infer(device, tmp_path, "--output-mode", "argmax") == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.argmax(scores, axis=1))
    assert _infer(device, tmp_path, "--output-mode", "top_k", "--k", "3") == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"),
                                  np.argsort(-scores, axis=1, kind="stable")[:, :3])
    assert _infer(device, tmp_path, "--output-mode", "scores") == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), scores)


@pytest.mark.parametrize(("options", "fragment"), [
    (["--output-mode", "top_k"], "--output-mode top_k needs --k K"),
    (["--k", "2"], "--k is for --output-mode top_k"),
    (["--output-mode", "argmax", "--k", "2"], "--k is for --output-mode top_k, not"),
    (["--output-mode", "top_k", "--k", "6"], "allowed: k in 1..5"),
    (["--output-mode", "argmax", "--probabilities"], "--probabilities needs the scores"),
])
def test_bad_combinations_are_one_line_errors(device, files, capsys, options, fragment):
    tmp_path, _ = files
    assert _infer(device, tmp_path, *options) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err, err


def test_a_program_of_another_design_is_refused_field_by_field(device, files, capsys):
    tmp_path, _ = files
    other = dataclasses.replace(BOARD_WS, rows=BOARD_WS.rows + 1)
    rng = np.random.default_rng(4)
    hwgen.compile(random_network(rng, other, widths=[10, 6, 5], raw=True), other,
                  batch=6).save(tmp_path / "p.npz")
    assert _infer(device, tmp_path) == 2
    err = capsys.readouterr().err
    assert f"\n  rows: device {BOARD_WS.rows} vs program {other.rows}\n" in err, err
    assert "the program was compiled for" in err and "hwgen compile MODEL" in err, err
