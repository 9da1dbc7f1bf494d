"""The pass that folds flip-flops after a DP16KD read port into the block's output register."""

import json

import pytest

from hwgen import boards


def _ram_netlist(width=18, *, ff_params=None, lsr="0", enables=(50, 50), extra_reader=False):
    """A Yosys JSON netlist: a DP16KD whose pins DOB0, DOB1 (and DOA0, DOA1 in 36-bit mode)
    drive a flip-flop each, and the names of those pins. Nets: clock 2, data 10.., Q 30..."""
    dram = {"type": "DP16KD", "parameters": {
        "DATA_WIDTH_A": format(width, "032b"), "DATA_WIDTH_B": format(width, "032b"),
        "REGMODE_A": "NOREG", "REGMODE_B": "NOREG"},
        "port_directions": {}, "connections": {"CLKA": [2], "CLKB": [2], "OCEA": ["1"],
                                              "OCEB": ["1"], "CEB": [3]}}
    cells = {"ram": dram}
    pins = ["DOB0", "DOB1"] + (["DOA0", "DOA1"] if width == 36 else [])
    for k, pin in enumerate(pins):
        dram["port_directions"][pin] = "output"
        dram["connections"][pin] = [10 + k]
        params = {"CEMUX": "CE", "CLKMUX": "CLK", "GSR": "DISABLED", "LSRMUX": "LSR",
                  "REGSET": "RESET", "SRMODE": "LSR_OVER_CE", **(ff_params or {})}
        cells[f"ff{k}"] = {"type": "TRELLIS_FF", "parameters": params,
                           "port_directions": {"CLK": "input", "CE": "input", "LSR": "input",
                                               "DI": "input", "Q": "output"},
                           "connections": {"CLK": [2], "CE": [enables[k % 2]], "LSR": [lsr],
                                           "DI": [10 + k], "Q": [30 + k]}}
    if extra_reader:
        cells["lut"] = {"type": "LUT4", "parameters": {}, "port_directions": {"A": "input"},
                        "connections": {"A": [10]}}
    return {"modules": {"top": {"ports": {}, "cells": cells}}}, pins


@pytest.mark.parametrize("width", [18, 36])
def test_fold_output_registers_moves_the_flip_flops_into_the_block(width):
    netlist, pins = _ram_netlist(width)
    folded = boards.fold_output_registers(netlist)
    cells = netlist["modules"]["top"]["cells"]
    assert folded == [("ram", "AB" if width == 36 else "B")]
    assert set(cells) == {"ram"}
    ram = cells["ram"]
    sides = "AB" if width == 36 else "B"
    for side in sides:
        assert ram["parameters"][f"REGMODE_{side}"] == "OUTREG"
        assert ram["connections"][f"OCE{side}"] == [50]
    assert ram["parameters"]["REGMODE_A"] == ("OUTREG" if width == 36 else "NOREG")
    assert [ram["connections"][p] for p in pins] == [[30 + k] for k in range(len(pins))]


@pytest.mark.parametrize("case", [
    {"lsr": 7}, {"ff_params": {"REGSET": "SET"}}, {"ff_params": {"CLKMUX": "INV"}},
    {"enables": (50, 51)}, {"extra_reader": True},
], ids=["reset", "set", "inverted-clock", "two-enables", "shared-bit"])
def test_fold_output_registers_leaves_other_registers_alone(case):
    netlist, _ = _ram_netlist(**case)
    before = json.dumps(netlist, sort_keys=True)
    assert boards.fold_output_registers(netlist) == []
    assert json.dumps(netlist, sort_keys=True) == before
