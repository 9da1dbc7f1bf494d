"""The devices of a training (hwgen.train.devices): checks, shards, threads, counted work."""

import itertools
import types

import numpy as np
import pytest
from support import COMPILER_CONFIGS

from hwgen import AcceleratorConfig
from hwgen.compiler import compile_network
from hwgen.cycles import program_cycles
from hwgen.train import DeviceGroup, DeviceUsage, product_network

CONFIG = COMPILER_CONFIGS["3x2"]


@pytest.mark.parametrize(("rows", "n", "sizes"), [
    (10, 3, [4, 3, 3]), (9, 3, [3, 3, 3]), (2, 3, [1, 1, 0]), (0, 2, [0, 0]), (7, 1, [7])])
def test_shards_cover_the_rows_in_order(interpreted, rows, n, sizes):
    shards = DeviceGroup(interpreted(CONFIG, n), CONFIG).shards(rows)
    assert [b - a for a, b in shards] == sizes
    assert shards[0][0] == 0 and shards[-1][1] == rows
    assert all(a[1] == b[0] for a, b in itertools.pairwise(shards))


def test_a_pool_gives_its_devices(interpreted):
    devices = interpreted(CONFIG, 2)
    pool = types.SimpleNamespace(devices=devices)
    assert DeviceGroup(pool, CONFIG).devices == devices


def test_run_counts_useful_and_issued_work(interpreted):
    group = DeviceGroup(interpreted(CONFIG, 1), CONFIG)
    weight = np.arange(20).reshape(5, 4) - 10
    program = compile_network(product_network(weight, CONFIG), CONFIG)
    x = np.ones((6, 5), dtype=np.int64)
    device = group.devices[0]
    opened = device.bytes_sent + device.bytes_received  # the INFO handshake
    np.testing.assert_array_equal(group.run(device, program, x), x @ weight)
    # 5 x 4 on a 3 x 2 array: 2 reduction tiles of 3, 2 output tiles of 2.
    assert group.usage == DeviceUsage(useful_macs=6 * 5 * 4, issued_macs=6 * 6 * 4, runs=1,
                                      cycles=program_cycles(program, 6),
                                      wire_bytes=device.bytes_sent + device.bytes_received
                                      - opened)
    assert group.usage.wire_bytes > 0


def test_each_runs_every_device_and_names_the_failing_one(interpreted):
    devices = interpreted(CONFIG, 3)
    group = DeviceGroup(devices, CONFIG)
    assert group.each(lambda i, d: (i, d.url)) == [(i, d.url) for i, d in enumerate(devices)]

    def work(index, device):
        if index:
            raise OSError(f"link {index} broke")
        return index

    with pytest.raises(OSError, match="link 1 broke") as info:
        group.each(work)
    assert f"on device 1 ({devices[1].url}) of 3" in "".join(info.value.__notes__)


def test_usage_arithmetic():
    a = DeviceUsage(useful_macs=5, cycles=2)
    before = a.copy()
    a.add(DeviceUsage(useful_macs=1, wire_bytes=7))
    assert a.minus(before) == DeviceUsage(useful_macs=1, wire_bytes=7)


class NoInfer:
    def load(self, program):
        pass

    def counters(self):
        pass


@pytest.mark.parametrize(("devices", "error", "message"), [
    ([], ValueError, "at least one device; got none"),
    ("socket://x:1", TypeError, "one str; allowed: a list"),
    (5, TypeError, "is a int; allowed: a list of devices"),
    ([NoInfer()], TypeError, r"devices\[0\] is a NoInfer without infer"),
])
def test_bad_device_lists_are_refused(devices, error, message):
    with pytest.raises(error, match=message):
        DeviceGroup(devices, CONFIG)


def test_a_single_device_must_be_in_a_list(interpreted):
    with pytest.raises(TypeError, match=r"one Accelerator.*write \[device\]"):
        DeviceGroup(interpreted(CONFIG, 1)[0], CONFIG)


def test_a_device_twice_is_refused(interpreted):
    device = interpreted(CONFIG, 1)[0]
    with pytest.raises(ValueError, match=r"devices\[1\].*twice"):
        DeviceGroup([device, device], CONFIG)


def test_devices_of_another_configuration_are_refused(interpreted):
    other = AcceleratorConfig(rows=2, cols=2)
    devices = interpreted(CONFIG, 1) + interpreted(other, 1)
    with pytest.raises(ValueError, match=f"device 1 .* config hash {other.hash}, not from "):
        DeviceGroup(devices, CONFIG)


def test_config_must_be_a_configuration(interpreted):
    with pytest.raises(TypeError, match="config is a dict"):
        DeviceGroup(interpreted(CONFIG, 1), {})
