"""A Python model of the device: its memories, and a controller that runs compiled programs.

:class:`ProgramInterpreter` executes a :class:`hwgen.compiler.Program` the way the hardware
does: it decodes descriptors (and a spatial layer's geometry words) with the layouts of
:mod:`hwgen.memmap`, walks each layer's output pixels and patches with the geometry's steps as
the patch walker does, and runs each layer with its kind's interpreter step
(:meth:`hwgen.passes.base.Pass.interpret`, found with :func:`hwgen.passes.lookup`): a matrix
pass reads weights, parameters and activations at the documented addresses, accumulates tile by
tile and requantizes with Python integers (docs/arithmetic.md); a
max-pooling pass pools word by word as the pooler does; an add pass adds two tensors' words
lane by lane, each scaled by its channel's multiplier, and requantizes them. The steps share
no code with the compiler but the memory map (tests/passes checks it); the tests compare the
interpreter's results with :meth:`hwgen.nn.QuantizedNetwork.forward`.
"""

import random

import numpy as np
from amaranth.hdl import Shape

from hwgen.compiler.bf16 import bf16_output_values
from hwgen.memmap import (
    Region,
    descriptor_layout,
    geometry_layout,
    geometry_words,
    param_lane_layout,
)
from hwgen.passes import lookup
from hwgen.passes.base import signed_range
from hwgen.passes.fused_pool import walk

__all__ = ["ProgramInterpreter", "run_on_interpreter", "signed", "signed_range"]


def signed(value, bits):
    """Return the two's complement value of the low ``bits`` bits of ``value``."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


class ProgramInterpreter:
    """Memories of ``config`` and a controller that runs programs from them.

    Words never written read as garbage (fixed per address), as a block RAM after power-up
    would; so padding the hardware does not write is never assumed to be zero. Where the
    device reads zeros instead of a word (the channels of a row past its pixel's words), the
    interpreter reads the garbage there: the weights of those channels must be zero.
    """

    def __init__(self, config, seed=0):
        self.config = config
        self.seed = seed
        self.b = config.act_lanes
        self.param_layout = param_lane_layout(config)
        self.p_lane = self.param_layout.size
        self.desc_layout = descriptor_layout(config)
        self.geom_layout = geometry_layout(config)
        self.desc_bits = self.desc_layout.size
        # A spatial layer's geometry: descriptor-wide PROGRAM words, the first the lowest.
        self.geom_words = geometry_words(config)
        self.wrap = 1 << max(1, (config.act_depth - 1).bit_length())   # ACT addresses wrap
        self.word_bits = {
            Region.PROGRAM: self.desc_bits,
            Region.WEIGHT: config.cols * config.w_bits,
            Region.PARAM: config.cols * self.p_lane,
            Region.ACT: self.b * config.in_bits,
            Region.OUTPUT: config.cols * config.acc_bits,
        }
        self.lane_shape = {Region.WEIGHT: (config.cols, config.w_bits),
                           Region.ACT: (self.b, config.in_bits),
                           Region.OUTPUT: (config.cols, config.acc_bits)}
        self.depth = {Region.PROGRAM: config.prog_depth, Region.WEIGHT: config.weight_depth,
                      Region.PARAM: config.param_depth, Region.ACT: config.act_depth,
                      Region.OUTPUT: config.out_depth}
        self.mem = {region: {} for region in Region}
        self.decoded = {}

    def read(self, region, addr):
        if addr not in self.mem[region]:
            garbage = random.Random(f"{self.seed}/{region.value}/{addr}")
            self.mem[region][addr] = garbage.getrandbits(self.word_bits[region])
        return self.mem[region][addr]

    def write(self, region, addr, word):
        assert 0 <= addr < self.depth[region], (region, addr)
        assert 0 <= word < 1 << self.word_bits[region], (region, word)
        self.mem[region][addr] = word
        self.decoded.pop((region, addr), None)

    def lanes(self, region, addr):
        """Return the signed lanes of a word of WEIGHT, ACT or OUTPUT."""
        key = (region, addr)
        if key not in self.decoded:
            count, bits = self.lane_shape[region]
            word = self.read(region, addr)
            self.decoded[key] = [signed(word >> (j * bits), bits) for j in range(count)]
        return self.decoded[key]

    def write_lanes(self, region, addr, values, first=0):
        """Write ``values`` to the lanes ``first ..`` of a word, keeping its other lanes."""
        bits = self.lane_shape[region][1]
        word = self.read(region, addr)
        for j, value in enumerate(values, start=first):
            assert signed_range(bits)[0] <= value <= signed_range(bits)[1], (region, value)
            mask = ((1 << bits) - 1) << (j * bits)
            word = word & ~mask | (int(value) << (j * bits)) & mask
        self.write(region, addr, word)

    def write_lane(self, region, addr, lane, value):
        self.write_lanes(region, addr, [value], lane)

    @staticmethod
    def _fields(bits, layout):
        """Return ``{field: value}`` of ``bits`` in ``layout``, signed fields signed."""
        values = {}
        for name, f in layout:
            value = (bits >> f.offset) & ((1 << f.width) - 1)
            values[name] = signed(value, f.width) if Shape.cast(f.shape).signed else value
        return values

    def descriptor(self, addr):
        return self._fields(self.read(Region.PROGRAM, addr),
                            self.desc_layout)

    def geometry(self, addr):
        """Return the geometry in the ``geom_words`` PROGRAM words from ``addr``."""
        bits = sum(self.read(Region.PROGRAM, addr + j) << (j * self.desc_bits)
                   for j in range(self.geom_words))
        return self._fields(bits, self.geom_layout)

    @staticmethod
    def plain_geometry(d):
        """The geometry of a matrix layer over rows (documented in hwgen.memmap): 1x1 images
        and kernel, each row ``src_stride`` words after the last, ``k_tiles`` channel
        groups, no channel window, no weight repeat and whole tiles."""
        return {"h": 1, "w": 1, "oh": 1, "ow": 1, "kh": 1, "kw": 1, "sy": 1, "sx": 1,
                "pad_top": 0, "pad_left": 0, "cgs": d["k_tiles"], "col_step": 0, "row_step": 0,
                "img_step": d["src_stride"], "ky_step": 0, "cb_word": 0, "cb_rem": 0, "wrep": 0,
                "wdiag": 0}

    def params(self, addr, lane):
        """Return ``(bias, mult, shift, mult_neg)`` of one lane of a PARAM word (``mult_neg``
        0 on a design without bounds, whose lanes have none)."""
        v = self.read(Region.PARAM, addr) >> (lane * self.p_lane)
        f = self._fields(v, self.param_layout)
        return f["bias"], f["mult"], f["shift"], f.get("mult_neg", 0)

    def load(self, program, x):
        for region, (base, words) in program.images.items():
            for i, word in enumerate(words):
                self.write(region, base + i, word)
        for i, word in enumerate(program.pack_input(x)):
            self.write(Region.ACT, program.input.base + i, word)

    def run(self, m):
        """Run the program in PROGRAM from word 0 on ``m`` samples; return the last layer's
        descriptor, its geometry under ``"geometry"``."""
        pc, depth = 0, self.depth[Region.PROGRAM]
        while pc < depth:
            d = self.descriptor(pc)
            pc += 1
            kind = lookup(d["kind"])
            if d["spatial"]:
                assert pc + self.geom_words <= depth, "geometry words past the program memory"
                g = self.geometry(pc)
                pc += self.geom_words
            else:
                assert not kind.spatial_only, f"a {kind.kind.name} layer is spatial"
                g = self.plain_geometry(d)
            kind.interpret(self, d, g, m)
            if d["last"]:
                return {**d, "geometry": g}
        raise AssertionError("no descriptor with last=1")

    def pixel_words(self, d, g, m):
        """Return ``(oy, ox, word)`` arrays of a layer's output pixels in order (sample, row,
        column; with a fused pool, window by window: :func:`hwgen.passes.fused_pool.walk`):
        ``word`` is the ACT word of the pixel's kernel position (0, 0), walked from
        ``src_base`` with the geometry's steps, as the device walks it."""
        oy, ox, words, _ = walk(g, m, d["src_base"], wrap=self.wrap)
        return oy, ox, words

    def kernel_offsets(self, d, g):
        """Return ``[(ky, kx, offset)]`` of the kernel (or window) positions in walk order: the
        words from position (0, 0), ``src_stride`` more along a row, ``ky_step`` more from a
        row's last to the next row's first."""
        out, off = [], 0
        for ky in range(g["kh"]):
            for kx in range(g["kw"]):
                out.append((ky, kx, off))
                step = d["src_stride"] if kx != g["kw"] - 1 else g["ky_step"]
                off = (off + step) % self.wrap
        return out

    def gather(self, addrs):
        """Return the ACT lanes of the words ``addrs`` (an array) as ``[len(addrs), B]``."""
        unique, inverse = np.unique(addrs, return_inverse=True)
        table = np.array([self.lanes(Region.ACT, int(a)) for a in unique],
                         dtype=np.int64).reshape(len(unique), self.b)
        return table[inverse.reshape(-1)]

    def result(self, layer, m, channels=None):
        """Return the output of the last layer ``layer`` (:meth:`run`'s), read at the
        documented places: ``[m, n]`` of a layer over rows, ``[m, oh, ow, channels]`` of a
        spatial one (``channels``: a pooling layer's, which its descriptor does not hold)."""
        d, g = layer, layer["geometry"]
        region, lanes = (Region.OUTPUT, self.config.cols) if d["raw"] else (Region.ACT, self.b)
        stride, features = lookup(d["kind"]).output_rows(d, channels)
        pixels = m * g["oh"] * g["ow"]
        rows = [[self.lanes(region, d["dst_base"] + r * stride + n // lanes)[n % lanes]
                 for n in range(features)] for r in range(pixels)]
        rows = np.array(rows, dtype=np.int64).reshape(pixels, features)
        if not d["spatial"]:
            return rows
        return rows.reshape(m, g["oh"], g["ow"], features)


def run_on_interpreter(program, x, seed=0, *, out_shape=None, channels=None):
    """Run ``program`` on ``x`` (``[m, K]`` rows or ``[m, H, W, C]`` images); return
    (interpreter's output, unpack_output's output). The interpreter's output takes the shape
    ``[m, *out_shape]`` if given (the network's output shape); ``channels``, the last layer's
    channels, is needed when it pools (its descriptor does not hold them)."""
    device = ProgramInterpreter(program.config, seed)
    m = len(x)
    device.load(program, x)
    last = device.run(m)
    interpreted = device.result(last, m, channels)
    if program.config.dtype == "bf16":
        # The lanes' bit patterns as the bf16 values (fp32 scores) they are.
        interpreted = bf16_output_values(program, interpreted)
    if out_shape is not None:
        interpreted = interpreted.reshape(m, *out_shape)
    region, base, count = program.output_words(m)
    words = [device.read(region, base + i) for i in range(count)]
    return interpreted, program.unpack_output(words, m)
