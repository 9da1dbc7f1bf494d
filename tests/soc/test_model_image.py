"""The SoC firmware's model image and driver: the C arrays round-trip to the program's images
and packed inputs, the firmware's addressing finds the reference's scores, and the driver
(compiled with the host's gcc against a memory standing in for the bus) writes each piece
where the register map says and reads signed lanes back."""

import shutil
import subprocess

import numpy as np
import pytest
from support.networks import random_input_rows, small_dense_network

import hwgen
from hwgen.bus.describe import c_header
from hwgen.bus.regmap import RegisterMap
from hwgen.config import AcceleratorConfig
from hwgen.memmap import Region, regions
from hwgen.soc.c_driver import HWGEN_H
from hwgen.soc.design import reference_classes
from hwgen.soc.model_image import model_header, parse_model_header, pieces_of, words_of
from sim.interpreter import ProgramInterpreter, signed

# Narrow accumulators: an output lane of 24 bits straddles the bus's 32-bit pieces.
CONFIG = AcceleratorConfig(rows=4, cols=4, acc_bits=24, max_k=64)


@pytest.fixture(scope="module")
def compiled():
    network = small_dense_network(CONFIG, (12, 7, 6), last_raw=True, seed=3)
    program = hwgen.compile(network, CONFIG)
    x = random_input_rows(np.random.default_rng(5), CONFIG, 5, 12)
    ref = reference_classes(network, x)
    return network, program, x, ref, parse_model_header(model_header(program, x, ref))


def test_pieces_round_trip():
    words = [0, 1, (1 << 70) - 1, 0x1234_5678_9ABC_DEF0_1122]
    assert words_of(pieces_of(words, 72), 72) == words
    assert pieces_of([0x1_0000_0002], 40) == [2, 1]
    with pytest.raises(ValueError, match="multiple of 3"):
        words_of([1, 2], 72)


def test_the_images_and_inputs_round_trip(compiled):
    _, program, x, ref, (defines, arrays) = compiled
    geo = regions(CONFIG)
    table = {Region(r): (b, c, p, name) for r, b, c, p, name in arrays["images"]}
    assert len(table) == defines["IMAGES"] == len(program.images)
    for region, (base, words) in program.images.items():
        t_base, count, pieces, name = table[region]
        assert (t_base, count, pieces) == (base, len(words), -(-geo[region].word_bits // 32))
        assert words_of(arrays[name], geo[region].word_bits) == list(words)
    assert defines["CONFIG_HASH"] == int(program.config_hash[:8], 16)
    assert defines["BATCH"] == program.batch
    assert defines["SAMPLES"] == len(x)
    assert defines["IN_BASE"] == program.input.base
    assert arrays["hwgen_model_reference"] == list(ref)
    # Each sample's words are its own, so the firmware may copy any sample to any row.
    per = defines["IN_WORDS"] * defines["IN_PIECES"]
    inputs = arrays["hwgen_model_inputs"]
    assert len(inputs) == per * len(x)
    for s in range(len(x)):
        assert words_of(inputs[s * per:(s + 1) * per], geo[Region.ACT].word_bits) == \
            program.pack_input(x[s:s + 1])
    assert words_of(inputs, geo[Region.ACT].word_bits) == program.pack_input(x)


def test_the_firmware_addressing_finds_the_reference_classes(compiled):
    """What main.c does, step by step in Python on the program interpreter: write the
    image's arrays, the inputs row by row, run, and take each class from the score lanes
    where the header's constants place them."""
    network, _, x, _, (d, arrays) = compiled
    ip = ProgramInterpreter(CONFIG)
    geo = regions(CONFIG)
    for r, base, _, _, name in arrays["images"]:
        for i, word in enumerate(words_of(arrays[name], geo[Region(r)].word_bits)):
            ip.write(Region(r), base + i, word)
    act = words_of(arrays["hwgen_model_inputs"], geo[Region.ACT].word_bits)
    for i, word in enumerate(act):
        ip.write(Region(d["IN_REGION"]), d["IN_BASE"] + i, word)
    ip.run(len(x))
    classes = []
    for s in range(len(x)):
        scores = []
        for i in range(d["CLASSES"]):
            e = s * d["OUT_PITCH"] + i
            word = ip.read(Region(d["OUT_REGION"]), d["OUT_BASE"] + e // d["OUT_LANES"])
            bits = d["OUT_LANE_BITS"]
            scores.append(signed(word >> (e % d["OUT_LANES"] * bits), bits))
        classes.append(int(np.argmax(scores)))
    assert classes == list(np.argmax(network.forward(x), axis=1))


_MOCK_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "hwgen.h"
#include "hwgen_model.h"

static uint32_t bus[HWGEN_SIZE / 4];

int main(int argc, char **argv)
{
    uintptr_t base = (uintptr_t)bus;
    if (hwgen_load(base, hwgen_model_images, HWGEN_MODEL_IMAGES))
        return 3;
    fwrite(bus, 4, HWGEN_SIZE / 4, stdout);
    /* Then the lanes asked for: region, word, bit position, width. */
    for (int i = 1; i + 3 < argc; i += 4)
        printf("%ld\n", (long)hwgen_read_lane(base, atoi(argv[i]), atoi(argv[i + 1]),
                                              atoi(argv[i + 2]), atoi(argv[i + 3])));
    return 0;
}
"""


def test_the_driver_writes_the_windows_and_reads_signed_lanes(compiled, tmp_path):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no host C compiler (gcc) to compile the driver against a mock bus")
    _, program, x, ref, _ = compiled
    regmap = RegisterMap(CONFIG)
    (tmp_path / "hwgen_regs.h").write_text(c_header(regmap, "mock"))
    (tmp_path / "hwgen.h").write_text(HWGEN_H)
    (tmp_path / "hwgen_model.h").write_text(model_header(program, x, ref))
    (tmp_path / "mock.c").write_text(_MOCK_MAIN)
    subprocess.run([gcc, "-std=c99", "-Wall", "-Werror", "-O1", "-o", "mock", "mock.c"],
                   cwd=tmp_path, check=True, capture_output=True, text=True)
    # PARAM lanes at positions that straddle pieces, of several widths.
    base_param, param_words = program.images[Region.PARAM]
    word = param_words[0]
    asks = [(3, 9), (28, 8), (30, 24), (31, 32), (64, 5)]
    args = [str(v) for pos, bits in asks for v in (Region.PARAM.value, base_param, pos, bits)]
    done = subprocess.run([str(tmp_path / "mock"), *args], check=True, capture_output=True)
    bus = np.frombuffer(done.stdout[:regmap.size], dtype="<u4")
    for region, (base, words) in program.images.items():
        w = regmap.window(region)
        for i, value in enumerate(words):
            at = (w.offset // 4) + (base + i) * w.stride
            got = [int(p) for p in bus[at:at + w.pieces]]
            assert words_of(got, w.word_bits) == [value], (region, i)
    lanes = [int(v) for v in done.stdout[regmap.size:].split()]
    assert lanes == [signed(word >> pos, bits) for pos, bits in asks]
