"""A fit refusal says which design would hold the network (issue 31, item 5): this design with
the short fields raised, the board the fit estimate puts that on, and the presets that hold it.
Each suggestion is checked independently: the suggested design compiles the network, and the
fit estimate of it fits the named board and no smaller one."""

import dataclasses
import itertools
import re

import numpy as np
import pytest

import hwgen
from hwgen.boards import BOARDS, board_config, check_fit
from hwgen.boards.catalog import NAMED_PRESETS
from hwgen.boards.fit import FitError
from hwgen.compiler import CompileError
from hwgen.nn import MLP, digits_cnn, load_digits_images, quantize

#: The MLPerf Tiny autoencoder's widths (its BatchNorms folded away): 265,864 weights.
AD_WIDTHS = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640]


@pytest.fixture(scope="module")
def autoencoder():
    mlp = MLP(AD_WIDTHS, seed=0)
    return quantize(mlp, np.random.default_rng(0).normal(size=(32, 640)))


def _refusal(net, config):
    with pytest.raises(CompileError) as info:
        hwgen.compile(net, config)
    return info.value


def _suggested(message):
    """The fields of 'this design with a=1 and b=2' in ``message``."""
    found = re.search(r"this design with (.*?), which", message)
    assert found, message
    pairs = re.split(r", | and ", found.group(1))
    return {k: int(v) if v.isdigit() else v for k, v in (p.split("=") for p in pairs)}


def test_weights_refusal_names_the_design_and_board_that_hold_them(autoencoder):
    config = board_config(BOARDS["ulx3s-85f"], preset="ulx3s-85f-small")
    error = _refusal(autoencoder, config)
    # The refusal itself is unchanged: layer, buffer, need and capacity.
    assert (error.layer, error.resource, error.limit) == (0, "weight_depth", 2048)
    assert str(error).startswith("layer 0: weight words do not fit: layers 0..0 need 10240 "
                                 "words; limit weight_depth=2048; it would fit this design "
                                 "with weight_depth=")
    fields = _suggested(str(error))
    # Every weight tile of 8 rows: sum of ceil(K/8) * ceil(N/8) * 8 over the layers.
    tiles = sum(-(-k // 8) * -(-n // 8) * 8 for k, n in itertools.pairwise(AD_WIDTHS))
    assert fields["weight_depth"] == tiles == 33024
    grown = dataclasses.replace(config, **fields)
    hwgen.compile(autoencoder, grown)        # the suggestion holds the network
    est = check_fit(BOARDS["ulx3s-85f"], grown)
    assert f"puts on the ulx3s-85f ({est['bram']} of 208 DP16KD block RAMs" in str(error)
    with pytest.raises(FitError):             # and no smaller board would
        check_fit(BOARDS["ulx3s-45f"], dataclasses.replace(grown, clock_hz=62_500_000))


def test_spatial_refusal_names_the_presets_with_the_walker():
    x_train = load_digits_images()[0]
    net = quantize(digits_cnn(), x_train[:64], acc_bits=22, mult_bits=8)
    # The iCEBreaker's preset with the 256 weight words it had before it held the demo MLP, so
    # that the suggestion grows WEIGHT too.
    small = board_config(BOARDS["icebreaker"], weight_depth=256)
    error = _refusal(net, small)
    assert error.resource == "spatial"
    presets = re.search(r"the presets of (.*)$", str(error)).group(1).split(", ")
    # The 12F's and 25F's presets have the walker and too little WEIGHT (512 words) for the
    # first convolution's taps kernel position by position, enough for them packed (the
    # taps layout); the 85F's designs (its preset the zoo's) take networks of acc_bits <= 26;
    # the Tang Primer 20K's is the spatial device too (the Tang Nano 9K's has no walker).
    assert presets == ["ulx3s-12f", "ulx3s-25f", "ulx3s-45f", "ulx3s-85f", "tang-primer-20k",
                       "ulx3s-85f-small", "ulx3s-85f-resnet8", "ulx3s-85f-vww"]
    for name, (board, _) in NAMED_PRESETS.items():
        hwgen.compile(net, board_config(BOARDS[board], preset=name))
    for name in BOARDS:
        if name in presets:
            hwgen.compile(net, board_config(BOARDS[name]))
        else:
            with pytest.raises(CompileError):
                hwgen.compile(net, board_config(BOARDS[name]))
    fields = _suggested(str(error))
    # 552 words pixel by pixel; the first convolution's 3x3 taps of one channel in
    # ceil(9 / 4) = 3 tiles instead of 9, for its 2 output tiles of 4 rows: 48 fewer.
    assert fields["spatial"] == "True" and fields["weight_depth"] == 552 - 2 * (9 - 3) * 4
    # The preset's ACT split into SPRAM needs spatial=False: the grown design keeps it whole.
    assert small.act_spram_depth and fields["act_spram_depth"] == 0
    grown = dataclasses.replace(small, spatial=True,
                                **{k: v for k, v in fields.items() if k != "spatial"})
    hwgen.compile(net, grown)
    assert "puts on the ulx3s-12f" in str(error)


def test_nothing_holds_a_network_larger_than_every_board():
    mlp = MLP([1024, 1024, 1024, 1024], seed=0)
    net = quantize(mlp, np.random.default_rng(0).normal(size=(8, 1024)))
    error = _refusal(net, board_config(BOARDS["ulx3s-85f"]))
    assert error.resource == "weight_depth"
    assert "which the fit estimate puts on no board" in str(error)
    assert "the preset" not in str(error)


def test_other_refusals_get_no_suggestion(autoencoder):
    error = _refusal(autoencoder, board_config(BOARDS["icebreaker"]))
    assert error.resource == "acc_bits"
    assert "would fit" not in str(error) and "holds it" not in str(error)


def test_named_presets_are_listed_only_where_they_fit_their_board(autoencoder, monkeypatch):
    from hwgen.boards import catalog

    small = {"weight_depth": 66048, "param_depth": 512}   # the 12F's 4x4 array
    # A named preset is a whole design (it replaces the board's preset).
    monkeypatch.setattr(catalog, "NAMED_PRESETS", {
        "85f-ad": ("ulx3s-85f", {**catalog.ULX3S_PRESET, "weight_depth": 33024,
                                 "param_depth": 256}),
        # It compiles the network, but needs 130 of the 12F's 56 DP16KDs.
        "12f-ad": ("ulx3s-12f", {**catalog.ULX3S_SMALL_PRESET, **small}),
    })
    error = _refusal(autoencoder, board_config(BOARDS["ulx3s-45f"]))
    # The 85F's own preset (the zoo's design) holds it too.
    assert str(error).endswith(", or the presets of ulx3s-85f, 85f-ad")
    hwgen.compile(autoencoder, board_config(BOARDS["ulx3s-12f"], **small))
    with pytest.raises(FitError):
        check_fit(BOARDS["ulx3s-12f"], board_config(BOARDS["ulx3s-12f"], **small))
