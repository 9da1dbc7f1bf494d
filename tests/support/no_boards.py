"""A pytest plugin that hides the ``[boards]`` extra (the YoWASP tools) from a test run, as on a
machine where ``pip install '.[boards]'`` was not run: ``import yowasp_*`` fails and
``shutil.which`` finds no ``yowasp-*`` command (hwgen and the tests look the tools up with it).

``python -m pytest -p support.no_boards ...``: tests/test_boards_extra.py runs the tests that
need the extra this way, to check that each skips with the reason instead of failing.
"""

import importlib.abc
import shutil
import sys


class _HideYowasp(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0].startswith("yowasp"):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden)", name=name)


_which = shutil.which


def _which_but_yowasp(cmd, *args, **kwargs):
    return None if str(cmd).startswith("yowasp-") else _which(cmd, *args, **kwargs)


sys.meta_path.insert(0, _HideYowasp())
shutil.which = _which_but_yowasp
