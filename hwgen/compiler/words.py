"""Memory words as Python ints: packing lanes of signed integers into words and back.

A word is the unsigned value of its bits, lane ``j`` at bit ``j * lane_bits``, each lane in two's
complement. On the wire and in files a word is ``word_bytes(bits)`` little-endian bytes.
"""

import math
import numbers

import numpy as np

__all__ = ["check_words", "pack_words", "unpack_words", "word_bytes", "words_to_bytes"]

# Words packed per NumPy pass, so that the bit arrays of a large weight memory stay small.
_CHUNK_WORDS = 4096


def word_bytes(bits):
    """Return the bytes that hold a word of ``bits`` bits (at least one)."""
    return max(1, math.ceil(bits / 8))


def pack_words(fields, count, lanes, lane_bits):
    """Return ``count`` words of ``lanes`` lanes of ``lane_bits`` bits each, as Python ints.

    ``fields`` holds ``(values, offset, width)``: ``values`` an int64 array ``(count, lanes)``
    whose low ``width`` bits (two's complement) go to bits ``offset ..`` of every lane.
    """
    words = []
    weights = [np.arange(width, dtype=np.uint64) for _, _, width in fields]
    for start in range(0, count, _CHUNK_WORDS):
        stop = min(start + _CHUNK_WORDS, count)
        bits = np.zeros((stop - start, lanes, lane_bits), dtype=np.uint8)
        for (values, offset, width), shifts in zip(fields, weights, strict=True):
            u = np.ascontiguousarray(values[start:stop], dtype=np.int64).view(np.uint64)
            bits[:, :, offset:offset + width] = (u[..., None] >> shifts) & np.uint64(1)
        packed = np.packbits(bits.reshape(stop - start, lanes * lane_bits), axis=1,
                             bitorder="little")
        words.extend(int.from_bytes(row.tobytes(), "little") for row in packed)
    return words


def unpack_words(words, lanes, lane_bits):
    """Return the signed lanes of ``words`` as an int64 array ``(len(words), lanes)``."""
    nbytes = word_bytes(lanes * lane_bits)
    raw = b"".join(w.to_bytes(nbytes, "little") for w in words)
    arr = np.frombuffer(raw, dtype=np.uint8).reshape(len(words), nbytes)
    bits = np.unpackbits(arr, axis=1, bitorder="little")[:, :lanes * lane_bits]
    bits = bits.reshape(len(words), lanes, lane_bits).astype(np.uint64)
    u = (bits << np.arange(lane_bits, dtype=np.uint64)).sum(axis=2, dtype=np.uint64)
    if lane_bits < 64:
        # Subtract 2**lane_bits from negative lanes; uint64 wraps, the int64 view is exact.
        u = u - ((u >> np.uint64(lane_bits - 1)) << np.uint64(lane_bits))
    return u.view(np.int64)


def words_to_bytes(words, word_bits):
    """Return ``words`` as a uint8 array ``(len(words), word_bytes(word_bits))``, little-endian."""
    nbytes = word_bytes(word_bits)
    raw = b"".join(w.to_bytes(nbytes, "little") for w in words)
    return np.frombuffer(raw, dtype=np.uint8).reshape(len(words), nbytes)


def check_words(words, word_bits, what):
    """Return ``words`` as a list of ints, or raise ``ValueError`` naming ``what``."""
    out = []
    high = 1 << word_bits
    for index, word in enumerate(words):
        if not isinstance(word, numbers.Integral) or isinstance(word, bool | np.bool_):
            raise ValueError(f"{what}: word {index} is {type(word).__name__} {word!r}; "
                             "allowed: an integer")
        value = int(word)
        if not 0 <= value < high:
            raise ValueError(f"{what}: word {index} is {value}; allowed: 0..2**{word_bits} - 1 "
                             f"(unsigned {word_bits}-bit words)")
        out.append(value)
    return out
