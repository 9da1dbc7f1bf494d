"""host.info: the INFO payload the gateware's ROM holds (hwgen.protocol.info_bytes), read back
as a DeviceInfo and compared with the configuration."""

import numpy as np
import pytest
from support import TINY

from host.info import DeviceInfo, unpack_info
from hwgen.config import AcceleratorConfig
from hwgen.memmap import Region, regions
from hwgen.protocol import PROTOCOL_VERSION, info_bytes


@pytest.mark.parametrize("config", [
    TINY,
    AcceleratorConfig(),
    AcceleratorConfig(rows=64, cols=64, dataflow="os", in_bits=16, w_bits=16, acc_bits=64,
                      mult_bits=32, act_depth=1 << 20, acc_depth=(1 << 16) - 1),
], ids=["tiny", "default", "largest"])
def test_info_round_trip(config):
    raw = info_bytes(config, max_payload=2048)
    info = unpack_info(raw)
    assert info == DeviceInfo.from_config(config, 2048)
    assert info.version == PROTOCOL_VERSION and info.config_hash == config.hash_int
    assert info.regions == regions(config)
    assert info.mismatches(config) == []
    other = AcceleratorConfig(rows=config.rows, cols=config.cols, clock_hz=12_000_000)
    assert any(m.startswith("config_hash") for m in info.mismatches(other))


def test_info_rejects_garbage():
    raw = info_bytes(TINY)
    with pytest.raises(ValueError, match="does not hold"):
        unpack_info(raw[:-1])
    bad = bytearray(raw)
    bad[11] = 7  # dataflow
    with pytest.raises(ValueError, match="dataflow"):
        unpack_info(bytes(bad))


def test_mismatch_is_explained_in_the_users_terms():
    """What hwgen infer printed as a dump of Python objects: `name: device X vs program Y` per
    field, memories as words of bits, and the command that makes a matching program."""
    import hwgen
    from host.info import IncompatibleDevice, check_device, check_program
    from hwgen.nn import Dense, QuantizedNetwork

    device = AcceleratorConfig(rows=2, cols=2, weight_depth=256)
    other = AcceleratorConfig()
    info = DeviceInfo.from_config(device)
    net = QuantizedNetwork([Dense(np.ones((4, 3), np.int64), np.zeros(3, np.int64),
                                  np.ones(3, np.int64), np.zeros(3, np.int64), output="raw")])
    program = hwgen.compile(net, other)
    with pytest.raises(IncompatibleDevice) as caught:
        check_program(info, program, "socket://127.0.0.1:4000")
    text = str(caught.value)
    lines = text.splitlines()      # the headline, a line per field, the remedy
    assert lines[0] == (f"the program was compiled for {other.name} (config hash "
                        f"{other.hash}); the device at socket://127.0.0.1:4000 was built "
                        f"from config hash {device.hash}; differing fields:")
    assert lines[1:3] == ["  rows: device 2 vs program 8", "  cols: device 2 vs program 8"]
    weight = regions(device)[Region.WEIGHT]
    assert (f"  WEIGHT memory: device 256 words of {weight.word_bits} bits vs program "
            f"{other.weight_depth} words of {regions(other)[Region.WEIGHT].word_bits} bits"
            in lines)
    assert lines[-1] == ("make a program for the device's design: hwgen compile MODEL --build DIR "
                         "--out FILE (DIR: the folder `hwgen build` wrote the device's "
                         "bitstream to), or --config DIR/report.json")
    assert caught.value.differences[:2] == ["rows: device 2 vs program 8",
                                            "cols: device 2 vs program 8"]
    with pytest.raises(IncompatibleDevice) as caught:
        check_device(info, other, "socket://127.0.0.1:4000")
    text = str(caught.value)
    assert "; differing fields:\n  rows: device 2 vs config 8\n" in text
    for reprs in ("<Region", "RegionGeometry(", "{", "[", "Region."):
        assert reprs not in text
    assert caught.value.differences[0] == "rows: device 2 vs config 8"
