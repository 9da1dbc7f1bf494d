"""Build folders that the examples of a hypothesis-driven cocotb test share: each example is a
simulator run of the same design, so its Verilog is written once and built once per
simulator (Icarus skips a build whose source has not changed, Verilator's make rebuilds
nothing)."""

import json

from sim.runner import run_cocotb_source

__all__ = ["SharedBuilds"]


class SharedBuilds:
    """One folder per design and simulator under ``root`` (a test module's temporary path).

    Parameters
    ----------
    root : pathlib.Path
    """

    def __init__(self, root):
        self.root = root
        self._sources = {}

    def run(self, name, verilog, simulator, test_module, *, cases, cases_env, top="dut",
            testcase=None, env=None):
        """Run ``test_module`` on design ``name`` built by ``simulator``, the drawn ``cases``
        in a JSON file whose path is in the bench's variable ``cases_env``; return the number
        of cocotb tests that ran (see :func:`sim.runner.run_cocotb_source`, which raises on a
        failure: the file stays beside the log).

        Parameters
        ----------
        name : str
            The design's name, its folder's.
        verilog : callable
            Returns the design's Verilog (top module ``top``); called once per session.
        cases
            JSON data.
        env : dict, optional
            More of the bench's environment.
        """
        if name not in self._sources:
            src = self.root / name / f"{top}.v"
            src.parent.mkdir(parents=True, exist_ok=True)
            src.write_text(verilog())
            self._sources[name] = src
        build_dir = self.root / name / simulator
        build_dir.mkdir(exist_ok=True)
        (build_dir / "cases.json").write_text(json.dumps(cases))
        return run_cocotb_source(self._sources[name], top, test_module, build_dir, label=name,
                                 simulator=simulator, testcase=testcase,
                                 env={**(env or {}), cases_env: str(build_dir / "cases.json")})
