"""Design-space exploration: sweep accelerator configurations in parallel on Dask.

:func:`sweep` evaluates every combination of the design options it is given on a board,
each point a task on a :mod:`dask.distributed` cluster (a local one by default), appends each
result to ``results.csv`` as it comes, and draws the Pareto front of throughput against LUTs and
DSPs (``pareto.md``, ``pareto.png``). ``hwgen dse`` is its command line; ``docs/dse.md`` the
guide.

- :mod:`hwgen.dse.space`: value lists and ranges, the points of a space, their keys;
- :mod:`hwgen.dse.model`: the model compiled onto each point, at each point's widths;
- :mod:`hwgen.dse.points`: one point's evaluation (estimate and build tiers);
- :mod:`hwgen.dse.results`: ``results.csv``;
- :mod:`hwgen.dse.driver`: the Dask driver (:func:`sweep`);
- :mod:`hwgen.dse.pareto`, :mod:`hwgen.dse.plot`: the front, its table and its picture.
"""

from .driver import DSEError, sweep
from .pareto import pareto_front
from .space import SpaceError, parse_values

__all__ = ["DSEError", "SpaceError", "pareto_front", "parse_values", "sweep"]
