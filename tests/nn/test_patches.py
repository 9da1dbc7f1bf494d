"""im2col against explicit loops; col2im is its transpose."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn.patches import col2im, conv_output_size, im2col

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def geometry(draw):
    h, w, c = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 3))
    padding = draw(st.integers(0, 2))
    kh = draw(st.integers(1, h + 2 * padding))
    kw = draw(st.integers(1, w + 2 * padding))
    stride = draw(st.integers(1, 4))
    return (draw(st.integers(0, 3)), h, w, c), (kh, kw), stride, padding


@FAST
@given(geometry(), st.integers(0, 2 ** 32 - 1))
def test_im2col_matches_loops(geom, seed):
    shape, (kh, kw), stride, padding = geom
    m, h, w, c = shape
    x = np.random.default_rng(seed).integers(-100, 100, size=shape)
    got = im2col(x, (kh, kw), stride, padding)
    oh, ow = conv_output_size(h, kh, stride, padding), conv_output_size(w, kw, stride, padding)
    assert got.shape == (m, oh, ow, kh * kw * c) and got.dtype == x.dtype
    for n, oy, ox, ky, kx, ch in np.ndindex(m, oh, ow, kh, kw, c):
        iy, ix = oy * stride + ky - padding, ox * stride + kx - padding
        inside = 0 <= iy < h and 0 <= ix < w
        assert got[n, oy, ox, (ky * kw + kx) * c + ch] == (x[n, iy, ix, ch] if inside else 0)


@FAST
@given(geometry(), st.integers(0, 2 ** 32 - 1))
def test_col2im_is_the_transpose(geom, seed):
    # <im2col(x), p> == <x, col2im(p)> for every x and p: col2im is the adjoint.
    shape, kernel, stride, padding = geom
    rng = np.random.default_rng(seed)
    x = rng.integers(-50, 50, size=shape)
    patches = im2col(x, kernel, stride, padding)
    p = rng.integers(-50, 50, size=patches.shape)
    back = col2im(p, shape, kernel, stride, padding)
    assert back.shape == shape
    assert int(np.sum(patches * p)) == int(np.sum(x * back))


def test_object_arrays_stay_exact():
    x = np.array([[[[2 ** 70]], [[-(2 ** 70)]]]], dtype=object)  # (1, 2, 1, 1)
    got = im2col(x, (2, 1), 1, 1)  # padded to (1, 4, 3, 1): 3x3 outputs of 2 values
    assert got.dtype == object and got.shape == (1, 3, 3, 2)
    a = 2 ** 70
    assert got[0, :, 1].tolist() == [[0, a], [a, -a], [-a, 0]]
    assert not got[0, :, [0, 2]].any()


@st.composite
def general_geometry(draw):
    """Per-axis strides, four-sided padding, each given in one of its forms."""
    h, w, c = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 3))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    kh = draw(st.integers(1, h + pads[0] + pads[1]))
    kw = draw(st.integers(1, w + pads[2] + pads[3]))
    strides = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    return (draw(st.integers(0, 3)), h, w, c), (kh, kw), strides, pads


@FAST
@given(general_geometry(), st.integers(0, 2 ** 32 - 1))
def test_general_im2col_matches_loops(geom, seed):
    shape, (kh, kw), (sy, sx), (top, bottom, left, right) = geom
    m, h, w, c = shape
    x = np.random.default_rng(seed).integers(-100, 100, size=shape)
    got = im2col(x, (kh, kw), (sy, sx), (top, bottom, left, right))
    oh, ow = (h + top + bottom - kh) // sy + 1, (w + left + right - kw) // sx + 1
    assert (conv_output_size(h, kh, sy, (top, bottom)),
            conv_output_size(w, kw, sx, (left, right))) == (oh, ow)
    assert got.shape == (m, oh, ow, kh * kw * c)
    for n, oy, ox, ky, kx, ch in np.ndindex(m, oh, ow, kh, kw, c):
        iy, ix = oy * sy + ky - top, ox * sx + kx - left
        inside = 0 <= iy < h and 0 <= ix < w
        assert got[n, oy, ox, (ky * kw + kx) * c + ch] == (x[n, iy, ix, ch] if inside else 0)


@FAST
@given(general_geometry(), st.integers(0, 2 ** 32 - 1))
def test_general_col2im_is_the_transpose(geom, seed):
    shape, kernel, strides, pads = geom
    rng = np.random.default_rng(seed)
    x = rng.integers(-50, 50, size=shape)
    patches = im2col(x, kernel, strides, pads)
    p = rng.integers(-50, 50, size=patches.shape)
    back = col2im(p, shape, kernel, strides, pads)
    assert back.shape == shape
    assert int(np.sum(patches * p)) == int(np.sum(x * back))


def test_padding_forms_agree():
    x = np.arange(2 * 5 * 4 * 3).reshape(2, 5, 4, 3)
    assert (im2col(x, (2, 3), 2, 1) == im2col(x, (2, 3), (2, 2), (1, 1, 1, 1))).all()
    assert (im2col(x, (2, 3), 1, (2, 1)) == im2col(x, (2, 3), 1, (2, 2, 1, 1))).all()
