"""The run-time codec (hwgen.compiler.codec) through Program.pack_input, output_words and
unpack_output: word layouts and the errors that name what is wrong."""

import numpy as np
import pytest

from hwgen.compiler import check_input_rows
from hwgen.memmap import Region


@pytest.mark.parametrize(("x", "fragment"), [
    (np.zeros((2, 5), dtype=np.float64), "dtype float64"),
    (np.zeros((2, 5), dtype=bool), "dtype bool"),
    (np.zeros(5, dtype=int), "shape (5,)"),
    (np.zeros((2, 6), dtype=int), "(M, 5)"),
    (np.zeros((5, 5), dtype=int), "batch=4"),
    (np.full((1, 5), 8), "x[0, 0] = 8 is outside"),
    (np.full((1, 5), -9), "-8..7"),
    (np.array([[1, 2, 3, 4, 2.5]], dtype=object), "float"),
])
def test_pack_input_errors(program, x, fragment):
    with pytest.raises(ValueError, match="pack_input") as info:
        program.pack_input(x)
    assert fragment in str(info.value)


def test_pack_input_layout(program):
    # B = 3 lanes of 4 bits: row 0 = [1, -1, 2 | 3, -8, pad], row 1 = [0, ...].
    words = program.pack_input(np.array([[1, -1, 2, 3, -8], [0, 0, 0, 0, 7]], dtype=np.int8))
    assert words == [0x2F1, 0x083, 0x000, 0x070]
    assert program.pack_input(np.zeros((0, 5), dtype=int)) == []


@pytest.mark.parametrize(("words", "m", "fragment"), [
    ([0] * 3, 2, "exactly m * words per sample = 4"),
    ([0, 0, -1, 0], 2, "word 2 is -1"),
    ([0, 1 << 72, 0, 0], 2, "word 1"),
    ([0, 0, 0, 1.0], 2, "float"),
    ([0] * 10, 5, "0..4"),
    ([], -1, "m=-1"),
])
def test_unpack_output_errors(program, words, m, fragment):
    with pytest.raises(ValueError) as info:
        program.unpack_output(words, m)
    assert fragment in str(info.value)


def test_unpack_output_ignores_padding_lanes(program):
    # cols = 3 lanes of 24 bits, N = 4: lane 2 of the second word is padding.
    garbage = 0x123456 << 48
    words = [(5 & 0xFFFFFF) | ((-1 & 0xFFFFFF) << 24) | ((-(1 << 23) & 0xFFFFFF) << 48),
             ((1 << 23) - 1) | garbage]
    got = program.unpack_output(words, 1)
    assert got.dtype == np.int64
    assert got.tolist() == [[5, -1, -(1 << 23), (1 << 23) - 1]]
    assert program.output_words(1) == (Region.OUTPUT, 0, 2)
    assert program.unpack_output([], 0).shape == (0, 4)



def test_check_input_rows_names_the_caller_and_its_rows():
    # The host checks whole inputs (any number of rows) with the same function.
    x = check_input_rows([[1, 2, 3]], 3, 4, "infer", rows="rows")
    assert x.dtype == np.int64 and x.tolist() == [[1, 2, 3]]
    with pytest.raises(ValueError, match=r"^infer: x has shape \(3,\); allowed: \(rows, 3\) "
                                         r"\(one row: x.reshape\(1, 3\)\)$"):
        check_input_rows([1, 2, 3], 3, 4, "infer", rows="rows")
    with pytest.raises(ValueError, match="infer: x is not an array"):
        check_input_rows([[1, 2], [3]], 2, 4, "infer")
