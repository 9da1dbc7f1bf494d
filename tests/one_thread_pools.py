"""One thread per pytest worker for NumPy's OpenBLAS and torch's OpenMP, set before either
library loads (``tests/conftest.py`` imports this first). pytest-xdist already runs a worker
per core, and the pools' idle threads spin against the other worker: tests/train and tests/nn
took a third more CPU with them. A caller's own setting wins."""

import os

POOLS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

for pool in POOLS:
    os.environ.setdefault(pool, "1")
