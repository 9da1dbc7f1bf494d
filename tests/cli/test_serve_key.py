"""``hwgen serve --key-file`` and ``hwgen infer --key-file``: the command lines of the shared key.

The served board is an in-process device on a TCP port (support.tcp_device), counting the bytes
that reach it; ``hwgen serve`` runs as a process, ``hwgen infer`` in this one. Outputs are
checked against :meth:`hwgen.nn.QuantizedNetwork.forward`.
"""

import re
import signal
import subprocess
import sys

import numpy as np
import pytest
from support import BOARD_WS as WS
from support.tcp_device import TcpDevice

import hwgen
from hwgen.cli import main
from sim.netgen import random_input, random_network


def hwgen_command(*args):
    return subprocess.run([sys.executable, "-m", "hwgen", *args], capture_output=True,
                          text=True, timeout=60, check=False)


def key_file(tmp_path, data=bytes(range(32)), mode=0o600, name="board.key"):
    path = tmp_path / name
    path.write_bytes(data)
    path.chmod(mode)
    return path


def test_serve_and_infer_with_a_key(tmp_path, capsys):
    net = random_network(np.random.default_rng(1), WS, widths=[10, 7, 5])
    hwgen.compile(net, WS, batch=8).save(tmp_path / "p.npz")
    x = random_input(np.random.default_rng(1), WS, 20, 10)
    np.save(tmp_path / "x.npy", x)
    key, other = key_file(tmp_path), key_file(tmp_path, bytes(32), name="other.key")
    infer = ["infer", "--program", str(tmp_path / "p.npz"), "--input", str(tmp_path / "x.npy"),
             "--timeout", "2"]
    with TcpDevice(WS) as board:
        proc = subprocess.Popen([sys.executable, "-m", "hwgen", "serve", "--device", board.url,
                                 "--key-file", str(key)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            match = re.fullmatch(r"serving .* on (socket://127\.0\.0\.1:\d+)\n", line)
            assert match, line
            url = match.group(1)
            # The right key: outputs as the reference computes them.
            assert main([*infer, "--url", url, "--key-file", str(key), "--output",
                         str(tmp_path / "y.npy")]) == 0
            np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), net.forward(x))
            served = board.received
            # A wrong key, and none: one line each, exit 2, nothing reaches the board.
            capsys.readouterr()
            assert main([*infer, "--url", url, "--key-file", str(other)]) == 2
            assert main([*infer, "--url", url]) == 2
            err = capsys.readouterr().err.splitlines()
            assert err == [
                f"hwgen infer: error: authenticating to {url}: the server rejected the key; "
                "allowed: the key (file) that hwgen serve was given with --key-file",
                f"hwgen infer: error: {url} asks for a key (hwgen serve --key-file) and none "
                "was given; allowed: key= the server's key or key file (hwgen infer "
                "--key-file PATH)"]
            assert board.received == served
            proc.send_signal(signal.SIGTERM)
            _, log = proc.communicate(timeout=30)
        finally:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, log
    # With a key, every client is reported, the rejected ones with their address.
    assert re.search(r"client 127\.0\.0\.1:\d+ connected", log), log
    assert re.search(r"client 127\.0\.0\.1:\d+ rejected: wrong key", log), log
    assert re.search(r"client 127\.0\.0\.1:\d+ rejected: no key", log), log


def test_serve_beyond_loopback_needs_a_key():
    result = hwgen_command("serve", "--device", "loop://", "--host", "0.0.0.0")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "hwgen serve: error: --host 0.0.0.0 is not a loopback address, and a board served "
        "beyond this machine needs a shared key; allowed: --key-file PATH (the same key file on "
        "the clients, at least 16 bytes, chmod 600), or --host 127.0.0.1, ::1 or localhost "
        "(this machine only; other machines through an SSH tunnel)\n")


@pytest.mark.parametrize(("command", "extra"), [
    ("serve", ["--device", "loop://"]),
    ("infer", ["--url", "loop://", "--program", "p.npz", "--input", "x.npy"]),
])
def test_bad_key_files_are_one_line(tmp_path, command, extra):
    cases = [
        (key_file(tmp_path, b"short", name="short"),
         "a key of 5 bytes is too short; allowed: at least 16 bytes"),
        (key_file(tmp_path, mode=0o604, name="open"),
         "other users may read or write it (mode 604); allowed: a file only its owner may"),
        (tmp_path / "missing", "cannot read it (No such file or directory)"),
    ]
    for path, message in cases:
        result = hwgen_command(command, *extra, "--key-file", str(path))
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"hwgen {command}: error: --key-file {path}: {message}")
        assert result.stderr.count("\n") == 1, result.stderr


def test_help_names_the_key_file():
    for command in ("serve", "infer"):
        result = hwgen_command(command, "--help")
        assert result.returncode == 0 and "--key-file" in result.stdout
