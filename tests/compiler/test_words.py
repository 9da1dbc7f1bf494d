"""Packing lanes into words and back (hwgen.compiler.words), against per-lane Python ints."""

import numpy as np
import pytest

from hwgen.compiler.words import (
    check_words,
    pack_words,
    unpack_words,
    word_bytes,
    words_to_bytes,
)


def naive_word(lanes, lane_bits):
    return sum((v & ((1 << lane_bits) - 1)) << (j * lane_bits) for j, v in enumerate(lanes))


@pytest.mark.parametrize(("lanes", "lane_bits"), [(1, 1), (3, 4), (8, 8), (5, 13), (2, 64)])
def test_pack_and_unpack_match_per_lane_ints(lanes, lane_bits):
    rng = np.random.default_rng(lanes * 100 + lane_bits)
    low, high = -(1 << (lane_bits - 1)), (1 << (lane_bits - 1)) - 1
    count = 5000  # more than one packing chunk
    values = rng.integers(low, high, size=(count, lanes), endpoint=True, dtype=np.int64)
    values[0] = low
    values[1] = high
    words = pack_words([(values, 0, lane_bits)], count, lanes, lane_bits)
    assert words[:50] == [naive_word(row, lane_bits) for row in values[:50].tolist()]
    assert words[-1] == naive_word(values[-1].tolist(), lane_bits)
    np.testing.assert_array_equal(unpack_words(words, lanes, lane_bits), values)


def test_fields_share_a_lane():
    # Two fields per lane: 3 bits at offset 0 and 5 bits at offset 3 of an 8-bit lane.
    a = np.array([[1, -1], [-4, 3]])
    b = np.array([[-16, 15], [0, -1]])
    words = pack_words([(a, 0, 3), (b, 3, 5)], 2, 2, 8)
    assert words == [naive_word([(1 & 7) | (-16 & 31) << 3, (-1 & 7) | 15 << 3], 8),
                     naive_word([(-4 & 7), (3 & 7) | (-1 & 31) << 3], 8)]


def test_words_to_bytes_is_little_endian():
    assert word_bytes(1) == 1 and word_bytes(8) == 1 and word_bytes(9) == 2
    got = words_to_bytes([0x0102, 0x1FFFF], 17)
    assert got.dtype == np.uint8 and got.tolist() == [[2, 1, 0], [0xFF, 0xFF, 1]]


@pytest.mark.parametrize(("words", "fragment"), [
    ([1, -1], "word 1 is -1"),
    ([256], "0..2**8 - 1"),
    ([1.0], "word 0 is float"),
    ([True], "word 0 is bool"),
])
def test_check_words_refuses(words, fragment):
    with pytest.raises(ValueError, match="image X") as info:
        check_words(words, 8, "image X")
    assert fragment in str(info.value)


def test_check_words_takes_numpy_integers():
    assert check_words(np.array([0, 255], dtype=np.uint8), 8, "w") == [0, 255]
