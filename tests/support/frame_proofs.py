"""What the proofs of the frame engine's two layers share (tests/formal/test_framing.py, the
frame layer; tests/formal/test_executor.py, the command layer): the accelerator and payload
buffer they are proved for, the solver's engine line, and the specs' own CRC model."""

from amaranth.hdl import Cat

from hwgen.config import AcceleratorConfig
from hwgen.memmap import regions
from hwgen.protocol import CRC_BYTES, CRC_PARAMETERS, HEADER_BYTES, AccessArgs, layout_bytes

__all__ = ["ARGS", "CONFIG", "ENGINE", "HEADER", "MAX_PAYLOAD", "STEP_MASKS", "crc16",
           "crc_step"]

# A small accelerator of narrow numbers: words of 1 (WEIGHT, ACT), 2 (OUTPUT), 3 (PARAM) and
# 4 bytes (PROGRAM), so that the largest WRITE is short.
CONFIG = AcceleratorConfig(rows=1, cols=1, in_bits=4, w_bits=4, acc_bits=10, mult_bits=8,
                           max_k=4, act_depth=16, weight_depth=16, param_depth=2, acc_depth=2,
                           out_depth=16, prog_depth=2, spatial=False, bounds=False,
                           residual=False, taps=False, fuse_pool=False)
ARGS = layout_bytes(AccessArgs)
#: The smallest buffer the engine takes: one WRITE of the widest word (11 bytes).
MAX_PAYLOAD = ARGS + max(g.word_bytes for g in regions(CONFIG).values())
#: A frame's bytes before its payload: the header and its CRC.
HEADER = HEADER_BYTES + CRC_BYTES
#: Yices with the state as bit-vectors, and no separate check of the assumptions at each
#: step: about three times faster on these specs than SymbiYosys's default.
ENGINE = "smtbmc --stbv --nopresat yices"


def crc16(data_bits, reg=(0,) * 16):
    """Return the CRC-16/XMODEM register ``reg`` (16 bits, least significant first) after
    ``data_bits`` (most significant first), as a list of 16 bits.

    A shift register over anything that XORs: bits as Python ints give the CRC (checked
    against :func:`binascii.crc_hqx` below); bits as one-hot masks (``1 << i`` for input bit
    ``i``) give, for each register bit, the mask of the input bits it is the XOR of."""
    poly = CRC_PARAMETERS.algorithm.polynomial
    reg = list(reg)
    for bit in data_bits:
        feedback = reg[15] ^ bit
        reg = [feedback if k == 0 else reg[k - 1] ^ (feedback if poly >> k & 1 else 0)
               for k in range(16)]
    return reg


# The CRC of one more byte, as masks over 24 input bits: the register (0..15), the byte (16..23).
STEP_MASKS = crc16([1 << (16 + k) for k in reversed(range(8))], reg=[1 << k for k in range(16)])


def crc_step(reg, byte):
    """Return the CRC register (a 16-bit value) after ``byte`` (an 8-bit value).

    The spec's own model of the CRC, independent of the ``amaranth.lib.crc`` unit in the
    engine but for one thing: each bit is a chain of XORs in the unit's order (the register's
    bits, then the byte's, each from bit 0), so that the solver meets the same circuit twice
    and not two different XOR networks, whose equality is hard for it."""
    inputs = [reg[k] for k in range(16)] + [byte[k] for k in range(8)]
    bits = []
    for mask in STEP_MASKS:
        bit = 0
        for i in range(24):
            if mask >> i & 1:
                bit ^= inputs[i]
        bits.append(bit)
    return Cat(*bits)


