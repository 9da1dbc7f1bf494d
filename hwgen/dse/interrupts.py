"""Ctrl-C taken while the sweep waits for a point, not in the middle of a call to Dask.

A Dask client's blocking calls (``future.result()``, ``client.nthreads()``, closing a cluster)
run a coroutine on the client's event-loop thread and wait for it. Interrupted before that
coroutine has started, distributed (2026.8) logs a ``NameError`` traceback from its own
``sync()`` clean-up, so a sweep stopped with Ctrl-C would print a traceback it does not have.
:class:`DeferredInterrupts` holds SIGINT back outside the waits that :meth:`waiting` marks and
raises :class:`KeyboardInterrupt` at the next of them, or on leaving.
"""

import contextlib
import signal
import threading

__all__ = ["DeferredInterrupts"]

_END = object()


class DeferredInterrupts:
    """A context manager: within it, SIGINT raises :class:`KeyboardInterrupt` only inside
    :meth:`waiting`; one that comes elsewhere is raised at the next :meth:`waiting` or on
    leaving. Outside the main thread (where Python takes no signal) it changes nothing."""

    def __init__(self):
        self._pending = False
        self._waiting = False
        self._previous = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc_info):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        if self._pending and exc_info[0] is None:
            self._pending = False
            raise KeyboardInterrupt

    def _on_sigint(self, signum, frame):
        if self._waiting:
            raise KeyboardInterrupt
        self._pending = True

    def each(self, iterable):
        """Yield the items of ``iterable``, each wait for the next one a :meth:`waiting`."""
        items = iter(iterable)
        while True:
            with self.waiting():
                item = next(items, _END)
            if item is _END:
                return
            yield item

    @contextlib.contextmanager
    def waiting(self):
        """Mark a wait that Ctrl-C may interrupt (one that holds no Dask call half done)."""
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt
        try:
            self._waiting = True
            yield
        finally:
            self._waiting = False
