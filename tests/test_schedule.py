"""The order a ``pytest -n 2`` run starts the tests in (:mod:`support.schedule`): every test the
list of the longest names exists, they come first in the list's order, and the one-at-a-time
scheduler replaces only xdist's default one."""

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.schedule import LONGEST, hand_out_one_at_a_time, longest_first

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize("prefix", LONGEST)
def test_each_longest_test_exists(prefix):
    path, name = prefix.split("::")
    name, param = re.fullmatch(r"(\w+)(?:\[(.*)\])?", name).groups()
    tree = ast.parse((ROOT / path).read_text())
    assert name in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    if param:   # a literal id (the smoke builds' table), or one of literal params and numbers
        text = (ROOT / path).read_text()
        assert f'"{param}"' in text or all(
            f'"{part}"' in text or (part.isdigit() and re.search(rf"\b{part}\b", text))
            for part in param.split("-"))


def test_the_longest_come_first_in_their_order_the_others_keep_theirs():
    ids = ["tests/a.py::test_short", LONGEST[2] + "[x]", "tests/b.py::test_short",
           LONGEST[0], "tests/c.py::test_short", LONGEST[2] + "[y]"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    longest_first(items)
    assert [i.nodeid for i in items] == [ids[3], ids[1], ids[5], ids[0], ids[2], ids[4]]


def test_only_the_default_scheduler_is_replaced():
    pytest.importorskip("xdist")
    from xdist.scheduler import LoadGroupScheduling

    def config(dist):
        return SimpleNamespace(getvalue=lambda name: dist, option=SimpleNamespace(
            tx=["popen"] * 2, numprocesses=2, maxschedchunk=None, loadscopereorder=True,
            loadgroup=True))

    assert hand_out_one_at_a_time(config("loadfile"), None) is None
    assert hand_out_one_at_a_time(config("worksteal"), None) is None
    assert isinstance(hand_out_one_at_a_time(config("load"), None), LoadGroupScheduling)
