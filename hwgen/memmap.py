"""Memory regions of the accelerator, the layer descriptor and the host port.

Everything that the compiler, the gateware, the frame engine and the host need to agree on about
memories is derived here from an :class:`~hwgen.config.AcceleratorConfig`, once.
"""

import dataclasses
import math

from amaranth.hdl import signed, unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ADDR_BITS", "COUNT_BITS", "Descriptor", "HostPortSignature", "Region",
           "RegionGeometry", "max_word_bits", "param_lane_layout", "regions"]

# Address and count fields of descriptors and of the host port; depths are checked against them.
ADDR_BITS = 20
COUNT_BITS = 16


class Region(enum.Enum, shape=unsigned(3)):
    """Memories the host can read and write, word addressed."""

    PROGRAM = 0  #: layer descriptors, one per word
    WEIGHT = 1   #: weight-tile rows: ``cols`` signed ``w_bits`` lanes
    PARAM = 2    #: per-channel bias/mult/shift, ``cols`` lanes of :func:`param_lane_layout`
    ACT = 3      #: activations: ``act_lanes`` signed ``in_bits`` lanes, rows padded to words
    OUTPUT = 4   #: raw accumulators of a ``raw`` output layer: ``cols`` signed ``acc_bits`` lanes


class Descriptor(data.Struct):
    """One layer of a program, as stored in :attr:`Region.PROGRAM`.

    Members
    -------
    relu : 1
        Apply ReLU after saturation.
    raw : 1
        Write the accumulators to :attr:`Region.OUTPUT` instead of requantizing.
    last : 1
        The program ends after this layer.
    k_tiles, n_tiles : COUNT_BITS
        Reduction tiles (``ceil(K / rows)``) and output tiles (``ceil(N / cols)``).
    n : COUNT_BITS
        Output features; lanes beyond ``n`` are not written.
    src_base, src_stride : ADDR_BITS
        Input rows in :attr:`Region.ACT`: row ``m`` starts at word ``src_base + m * src_stride``.
    dst_base, dst_stride : ADDR_BITS
        Output rows, in :attr:`Region.ACT` (``raw == 0``) or :attr:`Region.OUTPUT` (``raw == 1``).
    w_base : ADDR_BITS
        First weight row; tile ``(nt, kt)`` row ``i`` is at ``w_base + (nt * k_tiles + kt) * rows
        + i``.
    p_base : ADDR_BITS
        First parameter word; output tile ``nt`` is at ``p_base + nt``.
    """

    relu: 1
    raw: 1
    last: 1
    k_tiles: COUNT_BITS
    n_tiles: COUNT_BITS
    n: COUNT_BITS
    src_base: ADDR_BITS
    src_stride: ADDR_BITS
    dst_base: ADDR_BITS
    dst_stride: ADDR_BITS
    w_base: ADDR_BITS
    p_base: ADDR_BITS


def param_lane_layout(config):
    """Return the layout of one output channel's parameters in :attr:`Region.PARAM`."""
    return data.StructLayout({
        "bias": signed(config.acc_bits),
        "mult": unsigned(config.mult_bits),
        "shift": unsigned(config.shift_bits),
    })


@dataclasses.dataclass(frozen=True)
class RegionGeometry:
    """Shape of one memory region: ``depth`` words of ``word_bits`` bits.

    On the wire a word takes ``word_bytes`` bytes, little-endian, the unused top bits zero.
    """

    region: Region
    word_bits: int
    depth: int

    @property
    def word_bytes(self):
        return math.ceil(self.word_bits / 8)


def regions(config):
    """Return ``{Region: RegionGeometry}`` for ``config``."""
    p = param_lane_layout(config).size
    return {
        Region.PROGRAM: RegionGeometry(Region.PROGRAM, Descriptor.as_shape().size,
                                       config.prog_depth),
        Region.WEIGHT: RegionGeometry(Region.WEIGHT, config.cols * config.w_bits,
                                      config.weight_depth),
        Region.PARAM: RegionGeometry(Region.PARAM, config.cols * p, config.param_depth),
        Region.ACT: RegionGeometry(Region.ACT, config.act_lanes * config.in_bits,
                                   config.act_depth),
        Region.OUTPUT: RegionGeometry(Region.OUTPUT, config.cols * config.acc_bits,
                                      config.out_depth),
    }


def max_word_bits(config):
    """Return the widest word of any region."""
    return max(g.word_bits for g in regions(config).values())


class HostPortSignature(wiring.Signature):
    """The accelerator's port towards the host link (seen from the accelerator).

    Memory accesses are honoured only while ``busy`` is low. A write takes effect in the cycle
    ``we`` is high. A read is requested by a one-cycle ``re`` pulse; ``rdata`` is valid in the
    cycle ``rvalid`` is high (a fixed, small latency). ``start`` (one cycle, while idle) runs the
    program in :attr:`Region.PROGRAM` from word 0 on ``batch`` rows (1..``acc_depth``); ``busy``
    rises in the next cycle and falls when the last layer's results are written. ``clear`` zeroes
    the counters.

    Members
    -------
    region : In(Region)
    addr : In(ADDR_BITS)
    wdata : In(max_word_bits)
    we, re : In(1)
    rdata : Out(max_word_bits)
    rvalid : Out(1)
    start : In(1)
    batch : In(COUNT_BITS)
    busy : Out(1)
    clear : In(1)
    cycles, busy_cycles, macs : Out(64)
        Since ``clear``: cycles with ``busy`` high; cycles in which an activation row entered
        the array; multiply-accumulates issued (rows entered times ``rows * cols``).
    """

    def __init__(self, config):
        w = max_word_bits(config)
        super().__init__({
            "region": In(Region),
            "addr": In(ADDR_BITS),
            "wdata": In(w),
            "we": In(1),
            "re": In(1),
            "rdata": Out(w),
            "rvalid": Out(1),
            "start": In(1),
            "batch": In(COUNT_BITS),
            "busy": Out(1),
            "clear": In(1),
            "cycles": Out(64),
            "busy_cycles": Out(64),
            "macs": Out(64),
        })
