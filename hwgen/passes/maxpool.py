"""The max-pooling pass (:attr:`~hwgen.memmap.PassKind.MAXPOOL`): a
:class:`~hwgen.nn.MaxPool2D` as a pass over the activation banks.

For each output pixel and each of its input pixel's ``src_stride`` words, the pass reads the
window's words and writes their lane-wise maximum, one word after another from ``dst_base``:
an output pixel takes as many words as an input pixel. It has no weights or parameters, and
no padding; its descriptor's ``n`` is 0 (the channels are the words' lanes).
"""

import numpy as np

from ..memmap import PassKind, Region
from ..nn import MaxPool2D
from ..timing import unit_latencies
from .base import Lowered, Pass
from .bf16_matrix import bf16_max

__all__ = ["MaxPoolPass"]

# The reads start the cycle after PRIME2, each word's arrives a fixed delay later, its maximum
# is written a cycle after that (with the layer's end flag), one cycle more to move on.
_POOL_LEAD = 5
_POOL_TAIL = 4


class MaxPoolPass(Pass):
    """The max-pooling pass's hooks (see :class:`~hwgen.passes.base.Pass`)."""

    kind = PassKind.MAXPOOL
    layers = (MaxPool2D,)
    spatial_only = True
    cycle_fields = ("src_stride",)

    def lower(self, index, layer, shapes, config):
        return Lowered(None, 0, (layer.size, layer.size, (layer.stride,) * 2, (0,) * 4, 0))

    def place(self, p, config, w_base, p_base):
        return {"k": 0, "n": p.out_shape[-1], "k_tiles": 0, "n_tiles": 0,
                "activation": "identity", "output": "requant", "w_base": 0, "w_words": 0,
                "p_base": 0, "p_words": 0}

    def fields(self, p, spec):
        return {"n": 0}

    def cgs(self, p, config, src_stride):
        # The pooler counts a pixel's words with the channel-group counter.
        return src_stride

    def images(self, p, config):
        return [], []

    def macs(self, spec, config):
        return 0, 0

    def cycles(self, config, d, g, m, chunk, *, implementation=None):
        # kh * kw reads per output word, one a cycle.
        reads = m * g["oh"] * g["ow"] * d["src_stride"] * g["kh"] * g["kw"]
        # With registered reads the words pass a register of the pooler's too.
        staged = unit_latencies(config, implementation).read - 1
        return _POOL_LEAD + reads + _POOL_TAIL + staged

    def busy_rows(self, d, g, m):
        return 0

    def interpret(self, device, d, g, m):
        """The lane-wise maximum of each window's words (:meth:`combine`), written one word
        after another from ``dst_base``."""
        assert g["pad_top"] == g["pad_left"] == 0, "pooling has no padding"
        oy, ox, pix = device.pixel_words(d, g, m)
        window = device.kernel_offsets(d, g)
        assert (oy.max() * g["sy"] + g["kh"] <= g["h"]
                and ox.max() * g["sx"] + g["kw"] <= g["w"]), "a window past the image"
        words = d["src_stride"]
        addr = ((pix[:, None, None] + np.array([off for _, _, off in window])[None, :, None]
                 + np.arange(words)[None, None, :]) % device.wrap)      # [P, window, words]
        assert addr.max() < device.config.act_depth, "a window's word lies past ACT"
        lanes = device.gather(addr.reshape(-1)).reshape(*addr.shape, device.b)
        # bf16 lanes are bit patterns, whose order as integers is not the values'.
        best = bf16_max(lanes) if device.config.dtype == "bf16" else self.combine(lanes)
        out = d["dst_base"] + np.arange(len(pix) * words)
        assert out.max() < device.config.act_depth, "pooled words past ACT"
        for a, lanes in zip(out.tolist(), best.reshape(-1, device.b).tolist(), strict=True):
            device.write_lanes(Region.ACT, a, lanes)
        assert not set(addr.reshape(-1).tolist()) & set(out.tolist()), \
            "a layer overwrote its own input"

    @staticmethod
    def combine(lanes):
        """Return the lanes ``[P, window, words, B]`` of each window reduced over its
        positions (axis 1): their maximum."""
        return lanes.max(axis=1)

    def output_rows(self, d, channels):
        assert channels is not None, "a pooling layer's channels come from the caller"
        return d["src_stride"], channels
