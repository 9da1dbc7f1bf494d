"""`hwgen generate --top axis|wishbone`: the ports docs/integration.md lists, the map's files
beside the Verilog, byte-identical output, and clear errors."""

import json
import re

import pytest

from hwgen.cli import main
from hwgen.generate import build_top

WB_PORTS = [("bus__adr", "in", 30), ("bus__dat_w", "in", 32), ("bus__dat_r", "out", 32),
            ("bus__sel", "in", 4), ("bus__cyc", "in", 1), ("bus__stb", "in", 1),
            ("bus__we", "in", 1), ("bus__ack", "out", 1), ("bus__err", "out", 1),
            ("irq", "out", 1)]
AXIS_PORTS = [(f"{s}_axis__{n}", d if s == "s" else ("in" if d == "out" else "out"), w)
              for s in ("s", "m") for n, d, w in (("tdata", "in", 8), ("tvalid", "in", 1),
                                                   ("tready", "out", 1), ("tlast", "in", 1))]
SMALL = ["--rows", "2", "--cols", "3", "--act-depth", "64", "--weight-depth", "64",
         "--out-depth", "32", "--param-depth", "8", "--acc-depth", "8", "--prog-depth", "8"]


@pytest.mark.parametrize(("top", "ports", "files"), [
    ("wishbone", WB_PORTS, {"hwgen_regs.h", "hwgen_regs.json"}),
    ("axis", [*AXIS_PORTS, ("busy", "out", 1)], set()),
])
def test_generate_is_byte_identical_with_the_documented_ports(top, ports, files, tmp_path,
                                                             capsys):
    for out in ("a", "b"):
        assert main(["generate", "--top", top, *SMALL, "--out", str(tmp_path / out)]) == 0
    (v_path,) = (tmp_path / "a").glob("*.v")
    name = v_path.stem
    assert name.startswith("hwgen_ws_2x3_i8w8_") and name.endswith(f"_{top}")
    written = {p.name for p in (tmp_path / "a").iterdir()}
    assert written == {f"{name}.v", f"{name}.json", *files}
    # The command names every file it wrote.
    said = capsys.readouterr().out.splitlines()[0]
    assert {p.name for p in (tmp_path / "a").iterdir() if str(p) in said} == written
    for f in written:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    manifest = json.loads((tmp_path / "a" / f"{name}.json").read_text())
    assert [(p["name"], p["dir"], p["width"]) for p in manifest["ports"]] == ports
    verilog = (tmp_path / "a" / f"{name}.v").read_text()
    header = next(line for line in verilog.splitlines() if line.startswith(f"module {name}("))
    assert set(header[header.index("(") + 1:-2].split(", ")) == \
        {p[0] for p in ports} | {"clk", "rst"}


def test_unknown_top_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--top", "axi"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'axi'" in err and "axis" in err and "wishbone" in err
    with pytest.raises(ValueError, match=r"top='axi' is not a design; allowed: .*axis, wishbone"):
        build_top(None, "axi")


def test_a_map_too_large_for_the_bus_is_a_usage_error(monkeypatch, capsys, tmp_path):
    """Every configuration in range fits 30 address bits (tests/bus/test_regmap.py's
    largest); a narrower bus, as a smaller limit here, refuses with the region named."""
    from hwgen.bus import regmap

    monkeypatch.setattr(regmap, "_MAX_SHIFT", 6)
    assert main(["generate", "--top", "wishbone", *SMALL, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "hwgen generate: error: --top wishbone: the Wishbone top cannot map" in err
    assert "allowed: a window of at most 2**6 words" in err
    assert not list(tmp_path.iterdir())


def test_a_board_implementation_is_its_own_deterministic_netlist(tmp_path):
    """`hwgen soc` writes the core as the board builds it: the same files every time, not the
    plain netlist's."""
    from hwgen.boards.catalog import ECP5_IMPLEMENTATION
    from hwgen.config import AcceleratorConfig
    from hwgen.generate import write_design

    config = AcceleratorConfig(rows=2, cols=2)
    texts = [write_design(config, tmp_path / d, "wishbone", implementation)[0].read_text()
             for d, implementation in (("a", ECP5_IMPLEMENTATION), ("b", ECP5_IMPLEMENTATION),
                                       ("plain", None))]
    assert texts[0] == texts[1]
    assert texts[0] != texts[2]
    for text in texts:   # the cell the array instantiates is the one written beside it
        defined = set(re.findall(r"^module (hwgen_pe_\w+)", text, re.M))
        used = set(re.findall(r"^\s*(hwgen_pe_\w+) pe_", text, re.M))
        assert used and used == defined, (used, defined)
