"""hwgen.dse.pareto: the front against a brute-force check, and pareto.md."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hwgen.boards import BOARDS
from hwgen.dse.pareto import cost, fronts, pareto_front, render_markdown


def _brute_force(items):
    """Items no other item dominates (cost <= and value >=, one strictly)."""
    out = []
    for c, v in items:
        if not any(c2 <= c and v2 >= v and (c2 < c or v2 > v) for c2, v2 in items):
            out.append((c, v))
    return out


_points = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_points)
def test_the_front_is_the_non_dominated_set(items):
    front = pareto_front(items, lambda i: i[0], lambda i: i[1])
    assert sorted(front) == sorted(_brute_force(items))
    assert [c for c, _ in front] == sorted(c for c, _ in front)


def test_the_front_keeps_ties_and_skips_unknowns():
    items = [(1, 5), (1, 5), (2, 5), (1, 3), (None, 9), (0, None), (3, 7.5)]
    assert pareto_front(items, lambda i: i[0], lambda i: i[1]) == [(1, 5), (1, 5), (3, 7.5)]
    rng = np.random.default_rng(0)
    floats = [(float(c), float(v)) for c, v in rng.random((200, 2))]
    assert sorted(pareto_front(floats, lambda i: i[0], lambda i: i[1])) == \
        sorted(_brute_force(floats))


def _rows():
    return [
        {"point": "a", "status": "ok", "rows": 2, "cols": 2, "est_lut": 100, "est_dsp": 2,
         "device_infer_per_s": 10.0, "clock_mhz": 12.0, "link_infer_per_s": 5.0},
        {"point": "b", "status": "ok", "rows": 4, "cols": 2, "est_lut": 200, "est_dsp": 4,
         "device_infer_per_s": 20.0, "clock_mhz": 12.0, "link_infer_per_s": 5.0},
        # built: its measured LUTs (150) count, not the estimate (300)
        {"point": "c", "status": "ok", "rows": 4, "cols": 4, "est_lut": 300, "lut": 150,
         "est_dsp": 8, "dsp": 8, "device_infer_per_s": 30.0, "clock_mhz": 12.0,
         "link_infer_per_s": 5.0},
        {"point": "d", "status": "ok", "rows": 2, "cols": 4, "est_lut": 250, "est_dsp": 3,
         "device_infer_per_s": 15.0, "clock_mhz": 12.0, "link_infer_per_s": 5.0},
        # failed points are never on the front, however good they look
        {"point": "e", "status": "no-fit", "rows": 8, "cols": 8, "est_lut": 1,
         "est_dsp": 1, "device_infer_per_s": 99.0},
    ]


def test_fronts_use_measured_resources_and_ok_points_only():
    rows = _rows()
    assert cost(rows[2], "lut") == 150 and cost(rows[0], "lut") == 100
    got = fronts(rows)
    assert [r["point"] for r in got["lut"]] == ["a", "c"]
    assert [r["point"] for r in got["dsp"]] == ["a", "d", "b", "c"]


def test_pareto_md_lists_both_fronts():
    text = render_markdown(_rows(), BOARDS["icebreaker"], tier="estimate", model="tiny",
                           baud=1_000_000)
    assert text.startswith("# Pareto front: tiny on icebreaker (estimate tier)\n")
    assert "5 points: 4 ok, 1 failed (no-fit 1)." in text
    assert "The icebreaker has 5,280 logic cells, 8 SB_MAC16 DSP blocks and 30 block RAMs." in text
    lut = text.split("## Throughput against logic cells")[1].split("## Throughput against")[0]
    dsp = text.split("## Throughput against SB_MAC16 DSP blocks")[1]
    assert [line.split("`")[1] for line in lut.splitlines() if "`" in line] == ["a", "c"]
    assert [line.split("`")[1] for line in dsp.splitlines() if "`" in line] == \
        ["a", "d", "b", "c"]
    # The columns of the fields that vary, then the figures.
    assert "| rows | cols | clock MHz | logic cells |" in text
    assert "| 4 | 4 | 12 | 150 | 8 |  |  | 30 | 5 | `c` |" in text


def test_pareto_md_without_any_ok_point():
    rows = [{"point": "x", "status": "invalid", "rows": 0}]
    text = render_markdown(rows, BOARDS["ulx3s-85f"], tier="build", model="m", baud=115_200)
    assert "1 point: 0 ok, 1 failed (invalid 1)." in text
    assert text.count("No point is ok, so there is no front.") == 2
    assert "at Fmax" in text and "from place and route" in text and "115,200 baud" in text
