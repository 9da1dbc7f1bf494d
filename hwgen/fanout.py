"""One call per device, each in its own thread: the fan-out of the pool and of the training.

The devices compute in parallel (a board in its chip, a simulated board in its own process, the
in-process device in its thread); the host threads mostly wait on their links.
:func:`fan_out` is the one place that starts, names and waits for those threads, for
:class:`host.AcceleratorPool` (loading, inference) and :class:`hwgen.train.DeviceGroup` (every
matrix product of a training step). It lives in ``hwgen`` so that :mod:`hwgen.train` does not
import the host driver (only the command line joins the two).
"""

import threading

__all__ = ["device_name", "fan_out", "first_error"]

# The main thread wakes this often while the devices work, so that Ctrl-C gets through.
_JOIN_POLL_S = 0.1


def device_name(device, index):
    """Return ``"device INDEX (URL)"``, or ``"device INDEX"`` for a device without a URL."""
    url = getattr(device, "url", None)
    return f"device {index} ({url})" if url else f"device {index}"


def fan_out(work, devices, *, stop=None, prefix="device"):
    """Call ``work(index, device)`` for every device, each in its own thread; wait for all.

    Parameters
    ----------
    work : callable
        ``work(index, device) -> result``.
    devices : sequence
    stop : callable, optional
        ``stop(exc)`` is called when the wait is interrupted (Ctrl-C): it must make the
        threads' work end soon (the pool stops handing out chunks). The threads are then
        joined and ``exc`` raised.
    prefix : str
        Start of the threads' names (for debuggers and logs).

    Returns
    -------
    results : list
        ``work``'s results in device order (None where it raised).
    errors : dict
        ``{index: exception}`` of the calls that raised (the caller decides what they mean).
    """
    devices = list(devices)
    results = [None] * len(devices)
    errors = {}
    # Set when a call has returned: waited on rather than Thread.join, whose state an
    # interrupted join can leave wrong.
    done = [threading.Event() for _ in devices]

    def run(index, device):
        try:
            results[index] = work(index, device)
        except BaseException as exc:  # handed to the caller, which decides
            errors[index] = exc
        finally:
            done[index].set()

    threads = [threading.Thread(target=run, args=(i, d), daemon=True,
                                name=f"{prefix}-{device_name(d, i)}")
               for i, d in enumerate(devices)]
    try:
        for thread in threads:
            thread.start()
        for event in done:
            while not event.wait(_JOIN_POLL_S):
                pass
    except BaseException as exc:  # Ctrl-C: make the work end, wait for it, then stop
        if stop is not None:
            stop(exc)
        for thread, event in zip(threads, done, strict=True):
            if thread.ident is not None:  # started
                event.wait()
        raise
    return results, errors


def first_error(errors, devices):
    """Return the error of the first device (by order) in ``errors``, with a note naming the
    device, or None when there is none."""
    if not errors:
        return None
    index = min(errors)
    exc = errors[index]
    exc.add_note(f"(on {device_name(devices[index], index)} of {len(devices)})")
    return exc
