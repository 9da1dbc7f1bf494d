"""The run-time codec of a program: input rows to ACT words, output words back to rows.

Functions of a :class:`~hwgen.compiler.specs.MatrixSpec` and the compiled batch; the
:class:`~hwgen.compiler.Program` methods of the same names call them.
"""

import numbers

import numpy as np

from .words import check_words, pack_words, unpack_words

__all__ = ["check_input_rows", "check_input_samples", "check_rows", "output_words",
           "pack_input", "stream_index", "unpack_output"]


def check_input_rows(x, features, bits, what, *, rows="M"):
    """Return ``x`` as an int64 ``[rows, features]`` array of signed ``bits``-bit integers.

    Raises
    ------
    ValueError
        Starting with ``what``: not an array, a non-integer dtype or element, a wrong shape, or
        the first value outside the signed range (with its index).
    """
    return check_input_samples(x, (features,), bits, what, rows=rows)


def check_input_samples(x, sample_shape, bits, what, *, rows="M"):
    """Return ``x`` as an int64 ``[rows, *sample_shape]`` array of signed ``bits``-bit
    integers (rows of features, or NHWC images).

    Raises
    ------
    ValueError
        As :func:`check_input_rows`; an image batch in NCHW order is named as such.
    """
    sample_shape = tuple(sample_shape)
    allowed = "(" + ", ".join([rows, *map(str, sample_shape)]) + ")"
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: x is not an array ({exc}); allowed: integers of shape "
                         f"{allowed}") from None
    if arr.dtype == object:
        bad = [v for v in arr.flat
               if not isinstance(v, numbers.Integral) or isinstance(v, bool | np.bool_)]
        if bad:
            raise ValueError(f"{what}: x holds {type(bad[0]).__name__} {bad[0]!r}; allowed: "
                             "integers")
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{what}: x has dtype {arr.dtype}; allowed: an integer dtype "
                         "(quantize float inputs first, e.g. QuantizedNetwork.quantize_input)")
    if arr.shape[1:] != sample_shape or arr.ndim != len(sample_shape) + 1:
        hint = ""
        if arr.shape == sample_shape:
            what_one = "row" if len(sample_shape) == 1 else "sample"
            hint = f" (one {what_one}: x.reshape(1, {', '.join(map(str, sample_shape))}))"
        elif len(sample_shape) == 3 and arr.ndim == 4 and arr.shape[1:] == (
                sample_shape[2], *sample_shape[:2]):
            hint = " (images are NHWC: x.transpose(0, 2, 3, 1) converts NCHW)"
        raise ValueError(f"{what}: x has shape {arr.shape}; allowed: {allowed}{hint}")
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if arr.size:
        values = arr.astype(object) if arr.dtype == object else arr
        bad = np.argwhere((values < low) | (values > high))
        if len(bad):
            index = ", ".join(str(int(i)) for i in bad[0])
            raise ValueError(f"{what}: x[{index}] = {arr[tuple(bad[0])]} is outside signed "
                             f"in_bits={bits} ({low}..{high})")
    return arr.astype(np.int64)


def check_rows(m, batch, what):
    """Return ``m`` as an int, or raise ``ValueError`` unless it is an integer in
    ``0..batch``."""
    if not isinstance(m, numbers.Integral) or isinstance(m, bool) or not 0 <= m <= batch:
        raise ValueError(f"{what}: m={m!r} rows; allowed: an integer in 0..{batch} "
                         "(the compiled batch)")
    return int(m)


def stream_index(spec, m):
    """Return the stream elements of ``m`` samples' values of the matrix ``spec``: an int64
    array ``[m, *sample_shape]``, each value's element ``E`` (lane ``E % lanes`` of word
    ``base + E // lanes``)."""
    starts = np.arange(m * spec.runs, dtype=np.int64) * spec.pitch + spec.lead
    index = starts[:, None] + np.arange(spec.run, dtype=np.int64)
    return index.reshape(m, *spec.sample_shape)


def pack_input(spec, batch, x):
    """Return the words of the input rows ``x`` for the matrix ``spec``, by its element
    stream (see :meth:`Program.pack_input <hwgen.compiler.Program.pack_input>`)."""
    arr = check_input_samples(x, spec.sample_shape, spec.lane_bits, "pack_input", rows="M")
    m = arr.shape[0]
    if m > batch:
        raise ValueError(f"pack_input: x has {m} samples; allowed: at most batch={batch} "
                         "per run (split larger inputs)")
    count = spec.words(m)
    stream = np.zeros(count * spec.lanes, dtype=np.int64)
    stream[stream_index(spec, m)] = arr
    lanes = stream.reshape(count, spec.lanes)
    return pack_words([(lanes, 0, spec.lane_bits)], count, spec.lanes, spec.lane_bits)


def output_words(spec, batch, m):
    """Return ``(region, base, count)`` of the matrix ``spec`` after a run on ``m`` rows."""
    m = check_rows(m, batch, "output_words")
    return spec.region, spec.base, spec.words(m)


def unpack_output(spec, batch, words, m):
    """Decode ``words`` of the matrix ``spec`` into ``m`` rows, by its element stream
    (see :meth:`Program.unpack_output <hwgen.compiler.Program.unpack_output>`)."""
    m = check_rows(m, batch, "unpack_output")
    words = list(words)
    need = spec.words(m)
    if len(words) != need:
        what = "m * words per sample" if spec.per_pixel else "the words of m samples"
        raise ValueError(f"unpack_output: got {len(words)} words for m={m} samples; "
                         f"allowed: exactly {what} = {need}")
    words = check_words(words, spec.lanes * spec.lane_bits, "unpack_output")
    stream = unpack_words(words, spec.lanes, spec.lane_bits).reshape(-1)
    return stream[stream_index(spec, m)].copy()
