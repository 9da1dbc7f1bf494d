"""The host driver on a link that damages bytes (sim.lossy): every answer exact against
hwgen.nn at 1 % of the bytes damaged each way (flipped bits, dropped and inserted bytes, each
alone and mixed, single and in bursts), with fixed seeds; the frames cut smaller while the link
damages them and grown back after; a pool of such links; a dead link named in its error."""

import time

import numpy as np
import pytest

import hwgen
from host import Accelerator, AcceleratorPool
from host.errors import LinkError
from hwgen.config import AcceleratorConfig
from hwgen.protocol import FRAME_OVERHEAD, SYNC_REQUEST
from sim.inprocess import InProcessDevice
from sim.lossy import Damage, LossyTransport
from sim.netgen import random_input, random_network

CONFIG = AcceleratorConfig(rows=4, cols=4, act_depth=1024, weight_depth=256, param_depth=32,
                           acc_depth=64, out_depth=256, prog_depth=8)
WIDTHS = [24, 12, 6]


def _lossy(rate, burst=1, seed=0, kinds=("flip", "drop", "insert")):
    """An in-process device behind damage both ways, clean until :func:`_damage` turns it
    on (so that a test's program loads quickly)."""
    return LossyTransport(InProcessDevice(CONFIG), Damage(0, burst, seed, kinds),
                          Damage(0, burst, seed + 1, kinds)), rate


def _damage(link, rate):
    link.to_device.rate = link.to_host.rate = rate


def _network(seed=0, **compile_options):
    rng = np.random.default_rng(seed)
    net = random_network(rng, CONFIG, widths=WIDTHS, raw=True)
    return net, hwgen.compile(net, CONFIG, **compile_options), rng


def test_the_damage_model():
    data = bytes(range(256)) * 400
    assert Damage(0).apply(data) == data
    one, two = Damage(0.01, seed=3), Damage(0.01, seed=3)
    damaged = one.apply(data)
    assert damaged == two.apply(data) and damaged != data
    counts = one.counts
    assert counts["bytes"] == len(data)
    assert 0.008 < (counts["flip"] + counts["drop"] + counts["insert"]) / len(data) < 0.012
    assert len(damaged) == len(data) - counts["drop"] + counts["insert"]
    drops = Damage(0.01, burst=8, seed=4, kinds=("drop",))
    assert len(drops.apply(data)) == len(data) - drops.counts["drop"]
    assert drops.counts["drop"] % 8 == 0 or drops.counts["drop"] > 0
    with pytest.raises(ValueError, match=r"rate must be a share of the bytes in \[0, 1\)"):
        Damage(1.0)
    with pytest.raises(ValueError, match=r"burst must be an int >= 1 \(bytes\), not 0"):
        Damage(0.1, burst=0)
    with pytest.raises(ValueError, match=r"kinds=\('smash',\); allowed: some of flip, drop"):
        Damage(0.1, kinds=("smash",))


@pytest.mark.parametrize(("kinds", "burst"), [
    (("flip", "drop", "insert"), 1), (("flip",), 1), (("drop",), 1), (("insert",), 1),
    (("flip", "drop", "insert"), 6)],
    ids=["mixed", "flips", "drops", "inserts", "bursts"])
def test_every_answer_is_exact_at_one_percent(kinds, burst):
    net, program, rng = _network(1, batch=16)
    link, rate = _lossy(0.01, burst, seed=len(kinds) + 7 * burst, kinds=kinds)
    with Accelerator(link, config=CONFIG, timeout=0.5) as acc:
        acc.load(program)
        _damage(link, rate)
        for _ in range(2):
            x = random_input(rng, CONFIG, 24, WIDTHS[0])
            np.testing.assert_array_equal(acc.infer(x), net.forward(x))
        plan = acc.client.plan
    assert sum(plan.damage.values()) >= 2, "the link damaged next to nothing"
    assert plan.resent_bytes > 0


def test_frames_shrink_while_damaged_and_grow_back():
    net, program, rng = _network(2, batch=32)
    link, rate = _lossy(0.03, seed=11, kinds=("flip", "insert"))
    x = random_input(rng, CONFIG, 32, WIDTHS[0])
    with Accelerator(link, config=CONFIG, timeout=0.5) as acc:
        acc.load(program)
        plan = acc.client.plan
        assert plan.limit == plan.most == acc.info.max_payload
        _damage(link, rate)
        np.testing.assert_array_equal(acc.infer(x), net.forward(x))
        assert plan.limit < plan.most / 4, "3 % damage left the frames whole"
        _damage(link, 0)
        for _ in range(4):
            np.testing.assert_array_equal(acc.infer(x), net.forward(x))
        assert plan.limit == plan.most


def test_a_pool_of_damaged_links_is_exact():
    net, program, rng = _network(3, batch=8)
    links = [_lossy(0.01, seed=20 + i)[0] for i in range(2)]
    x = random_input(rng, CONFIG, 50, WIDTHS[0])
    with AcceleratorPool(links, config=CONFIG, timeout=0.5) as pool:
        pool.load(program)
        for link in links:
            _damage(link, 0.01)
        np.testing.assert_array_equal(pool.infer(x), net.forward(x))
        assert all(sum(d.client.plan.damage.values()) for d in pool.devices)


class _CrcFlipped(InProcessDevice):
    """A device that receives every request with a bit of its payload CRC flipped once
    ``broken`` (and answers each BAD_CRC, intact)."""

    broken = False

    def write(self, data):
        data = bytearray(data)
        if self.broken and data[:1] == bytes([SYNC_REQUEST]):
            data[FRAME_OVERHEAD + int.from_bytes(data[4:6], "little") - 1] ^= 0x01
        return super().write(bytes(data))


def test_a_dead_link_names_the_request_the_sizes_and_the_damage():
    """Every request damaged on its way: 16 attempts in a row at ``retries=0``."""
    _, program, rng = _network(4, batch=8)
    link = _CrcFlipped(CONFIG)
    with Accelerator(link, config=CONFIG, timeout=0.3, retries=0) as acc:
        acc.load(program)
        link.broken = True
        with pytest.raises(LinkError, match=r"infer rows 0\.\.7 of 8: no intact answer to "
                                            r"LOAD ACT\[\d+:\] runs=\d+ run=\d+ bits=8 in 16 "
                                            r"attempts in a row \(pieces of [\d, ]+ data bytes "
                                            r"tried\); damage seen: 16 BAD_CRC$"):
            acc.infer(random_input(rng, CONFIG, 8, WIDTHS[0]))


class _Trickle(LossyTransport):
    """A clean link whose answers come a byte at a time with pauses in between, as from a
    gate-level board or a USB bridge's latency timer: slow, not damaged."""

    _next = 0.0

    def read(self, size=1):
        now = time.monotonic()
        if now < self._next:    # nothing yet, as a serial port's read timing out
            time.sleep(0.001)
            return b""
        data = self.transport.read(1)
        if data:
            self._next = now + 0.02
        return data


def test_a_slow_clean_answer_is_waited_for_not_sent_again():
    net, program, rng = _network(5, batch=4)
    x = random_input(rng, CONFIG, 4, WIDTHS[0])
    with Accelerator(_Trickle(InProcessDevice(CONFIG)), config=CONFIG, timeout=5) as acc:
        acc.load(program)
        np.testing.assert_array_equal(acc.infer(x), net.forward(x))
        assert acc.client.stats["retries"] == 0
        assert acc.client.plan.timeouts == 0
