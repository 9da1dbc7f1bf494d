"""host.info: the INFO payload the gateware's ROM holds (hwgen.protocol.info_bytes), read back
as a DeviceInfo and compared with the configuration."""

import pytest
from support import TINY

from host.info import DeviceInfo, unpack_info
from hwgen.config import AcceleratorConfig
from hwgen.memmap import regions
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
