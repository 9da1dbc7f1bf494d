"""The Wishbone top's register map and its files: layout rules, the C header (compiled), the
JSON description, the table in docs/integration.md, and deterministic generation."""

import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import TINY

from hwgen.bus.describe import c_header, describe, markdown_table
from hwgen.bus.regmap import ADDR_WIDTH, REGISTER_PAGE_WORDS, RegisterMap
from hwgen.config import AcceleratorConfig
from hwgen.memmap import Region, regions

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integration.md"

CONFIGS = {
    "tiny": TINY,
    "default": AcceleratorConfig(),
    # The largest memories and words the configuration allows: the map still fits 30 bits.
    "largest": AcceleratorConfig(rows=64, cols=64, acc_bits=64, mult_bits=32,
                                 act_depth=1 << 20, weight_depth=1 << 20, out_depth=1 << 20,
                                 param_depth=1 << 16, acc_depth=(1 << 16) - 1,
                                 prog_depth=256, max_k=1 << 20, in_bits=16, w_bits=16),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_windows_hold_every_word_and_never_overlap(name):
    config = CONFIGS[name]
    rmap = RegisterMap(config)
    assert rmap.size == 32 << rmap.window_shift <= 4 << ADDR_WIDTH
    spans = [(0, REGISTER_PAGE_WORDS * 4)]
    for region, geo in regions(config).items():
        w = rmap.window(region)
        assert w.stride >= w.pieces == -(-geo.word_bits // 32)
        assert w.stride & (w.stride - 1) == 0
        assert w.depth * w.stride * 4 <= w.size == 4 << rmap.window_shift
        assert w.offset == (region.value + 1) * w.size
        spans.append((w.offset, w.offset + w.size))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert spans[-1][1] <= rmap.size


def test_registers_are_words_in_the_page_with_fields_inside():
    rmap = RegisterMap(AcceleratorConfig())
    offsets = [r.offset for r in rmap.registers]
    assert len(set(offsets)) == len(offsets)
    for r in rmap.registers:
        assert r.offset % 4 == 0 and r.offset < REGISTER_PAGE_WORDS * 4, r.name
        assert r.access in ("ro", "rw", "wo")
        masks = [f.mask for f in r.fields]
        assert all(m >> 32 == 0 for m in masks), r.name
        assert all(a & b == 0 for i, a in enumerate(masks) for b in masks[i + 1:]), r.name
        assert r.reset & ~sum(masks) == 0, r.name


def test_published_offsets_never_move():
    """Offsets the LiteX SoC's driver was written against (map version 1)."""
    rmap = RegisterMap(AcceleratorConfig())
    published = {"ID": 0x00, "VERSION": 0x04, "CONTROL": 0x08, "STATUS": 0x0C, "BATCH": 0x10,
                 "IRQ_ENABLE": 0x14, "RUNS": 0x18, "ERROR_CAUSE": 0x1C, "CYCLES_LO": 0x20,
                 "CYCLES_HI": 0x24, "BUSY_CYCLES_LO": 0x28, "MACS_LO": 0x30,
                 "CONFIG_HASH": 0x40, "ARRAY": 0x44, "WINDOW_SHIFT": 0x54,
                 "PROGRAM_DEPTH": 0x80, "OUTPUT_OFFSET": 0xCC}
    assert {n: rmap[n].offset for n in published} == published
    assert [f.name for f in rmap["CONTROL"].fields] == ["START", "CLEAR_DONE",
                                                         "CLEAR_COUNTERS", "CLEAR_ERROR"]
    assert [f.name for f in rmap["STATUS"].fields] == ["BUSY", "DONE", "ERROR", "IRQ"]


def test_unknown_register_names_the_registers():
    with pytest.raises(KeyError, match="no register 'NOPE'; registers: ID, VERSION"):
        RegisterMap(TINY)["NOPE"]


def test_json_description_matches_the_map():
    rmap = RegisterMap(TINY)
    desc = json.loads(json.dumps(describe(rmap, "x")))
    assert desc["size"] == rmap.size and desc["bus"]["addr_width"] == ADDR_WIDTH
    regs = {r["name"]: r for r in desc["registers"]}
    assert regs["BATCH"]["reset"] == 1 and regs["BATCH"]["access"] == "rw"
    assert regs["ACC_DEPTH"]["reset"] == TINY.acc_depth
    assert regs["STATUS"]["fields"][1] == {"name": "DONE", "lsb": 1, "width": 1, "mask": 2,
                                           "description": rmap["STATUS"].fields[1].doc}
    wins = {w["name"]: w for w in desc["windows"]}
    assert wins["PARAM"]["word_bits"] == regions(TINY)[Region.PARAM].word_bits


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_c_header_compiles_and_agrees_with_the_map(tmp_path):
    """The header's values, checked by the C compiler against the map's (static asserts)."""
    rmap = RegisterMap(AcceleratorConfig())
    (tmp_path / "hwgen_regs.h").write_text(c_header(rmap, "x"))
    checks = [f"_Static_assert(HWGEN_REG_{r.name} == {r.offset}u, \"{r.name}\");"
              for r in rmap.registers]
    checks += [f"_Static_assert(HWGEN_{w.name}_OFFSET == {w.offset}u && HWGEN_{w.name}_STRIDE"
               f" == {w.stride}u && HWGEN_{w.name}_DEPTH == {w.depth}u, \"{w.name}\");"
               for w in rmap.windows]
    checks.append(f"_Static_assert(HWGEN_CONTROL_START_MASK == 1u && HWGEN_STATUS_DONE_MASK == "
                  f"2u && HWGEN_SIZE == {rmap.size}u, \"fields\");")
    checks.append("_Static_assert(HWGEN_WINDOW_BYTE(HWGEN_ACT_OFFSET, HWGEN_ACT_STRIDE, 3, 1)"
                  f" == {rmap.window(Region.ACT).offset + 4 * (3 * 2 + 1)}u, \"byte\");")
    (tmp_path / "t.c").write_text('#include "hwgen_regs.h"\n' + "\n".join(checks) + "\n")
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-fsyntax-only", "t.c"],
                   cwd=tmp_path, check=True)


def test_docs_table_is_the_default_map():
    text = DOCS.read_text()
    table = re.search(r"<!-- register-table:.*?-->\n(.*?)\n<!-- end register-table -->", text,
                      re.S).group(1)
    assert table == markdown_table(RegisterMap(AcceleratorConfig()))
