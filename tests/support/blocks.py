"""For the accelerator's blocks alone (``tests/device``): random fields, descriptors and
geometries of the layers their neighbours would hand them."""

import math

from hwgen.memmap import act_addr_bits


def random_bits(rng, width):
    """Return ``width`` random bits as an ``int`` (any width; NumPy's integers stop at 64)."""
    return int.from_bytes(rng.bytes(width // 8 + 1), "little") & ((1 << width) - 1)


def garble(ctx, rng, value):
    """Set ``value`` (a signal or a view of any shape) to random bits: a port whose value must
    not matter in this cycle."""
    from amaranth.hdl import Value

    raw = Value.cast(value)
    ctx.set(raw, random_bits(rng, len(raw)))


def descriptor(config, **fields):
    """Return a layer descriptor of ``config`` as a ``dict`` for ``ctx.set``: ``fields``, the
    others zero."""
    from hwgen.memmap import descriptor_layout

    names = descriptor_layout(config).members
    unknown = sorted(set(fields) - set(names))
    if unknown:
        raise ValueError(f"descriptor: unknown field(s) {unknown}; allowed: {list(names)}")
    return {name: int(fields.get(name, 0)) for name in names}


def plain_geometry(desc):
    """Return the geometry the controller gives a plain layer (a matrix layer over rows,
    ``desc["spatial"] == 0``): 1x1 images and kernels, stride 1, no padding, ``k_tiles``
    channel groups, a row ``src_stride`` words after the last (``img_step``), no channel
    window step nor weight repeat. The steps a walk of 1x1 images never takes (``col_step``,
    ``row_step``, ``ky_step``) are left out."""
    return {"h": 1, "w": 1, "oh": 1, "ow": 1, "kh": 1, "kw": 1, "sy": 1, "sx": 1,
            "pad_top": 0, "pad_left": 0, "cgs": desc["k_tiles"], "img_step": desc["src_stride"],
            "cb_word": 0, "cb_rem": 0, "wrep": 0}


def image_geometry(config, *, h, w, kh, kw, stride, pad, words, cgs, window=0):
    """Return the geometry (:func:`hwgen.memmap.geometry_layout`) of a spatial layer over
    ``h x w`` images of ``words`` ACT words per pixel, from the definitions of its fields:
    each step is the distance in words between two input pixels, wrapped to the banks'
    address width. ``stride`` is ``(sy, sx)`` (or one int for both), ``pad`` ``(top, bottom,
    left, right)`` (or one int for all); ``window`` the channels an output tile's channel
    window moves by."""
    sy, sx = (stride, stride) if isinstance(stride, int) else stride
    top, bottom, left, right = (pad,) * 4 if isinstance(pad, int) else pad
    oh, ow = (h + top + bottom - kh) // sy + 1, (w + left + right - kw) // sx + 1
    wrap = 1 << act_addr_bits(config)

    def at(m, y, x):   # a pixel's first word, relative to sample 0's pixel (0, 0)
        return ((m * h + y) * w + x) * words

    cb_word, cb_rem = divmod(window, config.act_lanes)
    return {"h": h, "w": w, "oh": oh, "ow": ow, "kh": kh, "kw": kw, "sy": sy, "sx": sx,
            "pad_top": top, "pad_left": left, "cgs": cgs,
            "col_step": (at(0, 0, sx) - at(0, 0, 0)) % wrap,                # (oy, ox) -> ox + 1
            "row_step": (at(0, sy, 0) - at(0, 0, (ow - 1) * sx)) % wrap,    # -> (oy + 1, 0)
            "img_step": (at(1, 0, 0) - at(0, (oh - 1) * sy, (ow - 1) * sx)) % wrap,  # -> m + 1
            "ky_step": (at(0, 1, 0) - at(0, 0, kw - 1)) % wrap,             # (ky, kw-1) -> ky+1
            "cb_word": cb_word, "cb_rem": cb_rem, "wrep": 0}


def random_image_layer(rng, config, batch, *, max_side=5, max_channels=7, max_n_tiles=3,
                       pad=None):
    """Return ``(desc, geom)`` of a random spatial matrix layer over ``batch`` images that lie
    in the banks (somewhere, now and then ending at their last word): sides 1..``max_side``,
    any kernel that fits the padded image (not always square), strides 1..3 per axis, each
    padding side ``pad`` (0..2 by default, each side its own), 1..``max_channels`` channels in
    their words or a word more per pixel, half of the layers grouped (each output tile's
    channel window ``cgs`` groups of ``rows`` channels, each tile's starting in the pixel),
    fields the walk must not use random."""
    lanes = config.act_lanes
    fixed_pad = pad
    while True:
        h, w = (int(v) for v in rng.integers(1, max_side + 1, 2))
        pads = tuple(int(rng.integers(0, 3)) if fixed_pad is None else fixed_pad
                     for _ in range(4))
        top, bottom, left, right = pads
        sy, sx = (int(v) for v in rng.integers(1, 4, 2))
        kh = int(rng.integers(1, min(4, h + top + bottom) + 1))
        kw = int(rng.integers(1, min(4, w + left + right) + 1))
        c = int(rng.integers(1, max_channels + 1))
        words = math.ceil(c / lanes) + int(rng.choice([0, 0, 1]))
        if batch * h * w * words <= config.act_depth and kh <= h + top + bottom \
                and kw <= w + left + right:
            break
    n_tiles = int(rng.integers(1, max_n_tiles + 1))
    window = 0
    cgs = math.ceil(c / config.rows)
    if rng.random() < 0.5:
        # Grouped: a window of 1..c channels, each tile's starting inside the pixel (its end may
        # reach past it: zeros).
        window = int(rng.integers(1, max(1, (c - 1) // max(1, n_tiles - 1)) + 1))
        cgs = math.ceil(int(rng.integers(1, c + 1)) / config.rows)
    geom = image_geometry(config, h=h, w=w, kh=kh, kw=kw, stride=(sy, sx), pad=pads,
                          words=words, cgs=cgs, window=window)
    top_word = config.act_depth - batch * h * w * words
    base = top_word if rng.random() < 0.25 else int(rng.integers(0, top_word + 1))
    origin = (base - (top * w + left) * words) % (1 << act_addr_bits(config))
    desc = descriptor(config, spatial=1, k_tiles=kh * kw * cgs,
                      n_tiles=n_tiles, src_base=origin,
                      src_stride=words, raw=int(rng.random() < 0.4), leaky=int(rng.integers(2)),
                      n=random_bits(rng, 3), dst_base=random_bits(rng, 5),
                      dst_stride=random_bits(rng, 3), w_base=random_bits(rng, 5),
                      p_base=random_bits(rng, 3))
    return desc, geom
