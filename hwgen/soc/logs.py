"""LiteX's builder and the tools it runs print thousands of lines: send them to a log file."""

import contextlib
import os
import sys

__all__ = ["to_log"]


@contextlib.contextmanager
def to_log(path):
    """Within the block, send this process's stdout and stderr (file descriptors 1 and 2, so
    the tools it starts too) to ``path`` (appended)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
