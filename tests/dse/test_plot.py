"""hwgen.dse.plot: pareto.png is a picture of the rows, the same file for the same rows."""

import matplotlib.image

from hwgen.boards import BOARDS
from hwgen.dse.plot import link_bounds, plot_pareto


def _rows():
    rows = []
    for n, (r, c) in enumerate([(1, 1), (2, 1), (2, 2), (4, 2), (4, 4), (8, 8)]):
        rows.append({"point": str(n), "status": "ok" if r * c <= 16 else "no-fit", "rows": r,
                     "cols": c, "dataflow": "ws", "est_lut": 1000 + 400 * r * c,
                     "est_dsp": r * c // 2, "device_infer_per_s": 1e4 * r * c,
                     "link_infer_per_s": 900.0})
    rows.append({"point": "x", "status": "invalid", "rows": 0})
    return rows


def test_the_plot_is_a_png_and_deterministic(tmp_path):
    board = BOARDS["icebreaker"]
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    plot_pareto(_rows(), first, board, title="test", baud=1_000_000)
    plot_pareto(_rows(), second, board, title="test", baud=1_000_000)
    assert first.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert first.read_bytes() == second.read_bytes()
    image = matplotlib.image.imread(first)
    assert image.shape[0] > 300 and image.shape[1] > 2 * image.shape[0]   # two panels
    # Different rows, a different picture.
    plot_pareto(_rows()[:3], second, board, title="test", baud=1_000_000)
    assert first.read_bytes() != second.read_bytes()


def test_a_capacity_far_beyond_the_designs(tmp_path):
    # The ULX3S-85F's 83,640 LUTs: named in the legend, not drawn (another picture).
    near, far = tmp_path / "near.png", tmp_path / "far.png"
    plot_pareto(_rows(), near, BOARDS["icebreaker"], title="t", baud=1_000_000)
    plot_pareto(_rows(), far, BOARDS["ulx3s-85f"], title="t", baud=1_000_000)
    assert far.read_bytes()[:4] == b"\x89PNG" and far.read_bytes() != near.read_bytes()


def test_the_plot_of_a_sweep_without_ok_points(tmp_path):
    path = tmp_path / "empty.png"
    plot_pareto([{"point": "x", "status": "invalid"}], path, BOARDS["ulx3s-85f"], title="none",
                baud=115_200)
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_each_rate_of_a_sweep_gets_its_own_uart_bound(tmp_path):
    """Points whose boards' rates differ (the 9K at its bridge's 3 Mbaud where its clocks
    make it, 1 Mbaud elsewhere) each have their bound; a --baud sweep has one."""
    rows = _rows()[:5]
    for n, r in enumerate(rows):
        r["baud"], r["link_infer_per_s"] = (1_000_000, 1500.0 + n) if n < 2 else \
            (3_000_000, 4500.0 + n)
    assert link_bounds(rows, None) == [("UART bound at 1,000,000 baud", 1501.0),
                                       ("UART bound at 3,000,000 baud", 4504.0)]
    assert link_bounds(rows, 115_200) == [("UART bound at 115,200 baud", 4504.0)]
    assert link_bounds(rows[:2], None) == [
        ("UART bound at 1,000,000 baud (the board's rate)", 1501.0)]
    assert link_bounds([], None) == []
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    plot_pareto(rows, one, BOARDS["icebreaker"], title="t", baud=115_200)
    plot_pareto(rows, two, BOARDS["icebreaker"], title="t", baud=None)
    assert one.read_bytes() != two.read_bytes()
