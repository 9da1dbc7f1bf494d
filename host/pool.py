"""A pool of devices that share the samples of one inference (data parallelism).

:class:`AcceleratorPool` runs one compiled program on several devices at once: boards on this
machine's serial ports, boards on other machines shared with ``hwgen serve``, simulated boards.

.. code-block:: python

    from host import AcceleratorPool

    with AcceleratorPool(["socket://lab1:4600", "socket://lab2:4600", "/dev/ttyUSB1"]) as pool:
        pool.load(program)             # the same program on every device
        y = pool.infer(x)              # samples split across the devices, returned in order
        trace = pool.infer(x, outputs="all")  # every layer's output (compiled with readout)
        print(pool.counters().total)   # summed over the devices; .devices: one per URL

Each device is driven from its own thread; the devices compute in parallel (a board in its
chip, a simulated board in its own process), the host threads mostly wait on their links. Rows
are handed out in chunks of whole runs (``program.batch`` rows) from one queue: a device takes
a share of the rows still free that follows its measured rows per second (equal shares before
anything is measured), and the chunks shrink towards the end so that the devices finish
together. Results are placed by row index, so the order is kept whatever device ran a row.

A device whose link fails, that stops answering, stays busy or answers with an error status is
dropped: its unfinished chunk goes back to the queue and the others run it, so no row is lost or
run twice in the result. When no device is left, :class:`NoDeviceLeft` names each device and
why it was dropped.
"""

import collections
import collections.abc
import contextlib
import dataclasses
import logging
import math
import threading
import time

from hwgen.fanout import fan_out

from .accelerator import Accelerator, InferCounters, as_program
from .auth import read_key
from .client import DeviceError
from .info import IncompatibleDevice
from .plan import check_samples, infer_mode, output_dtype, readout_specs, sample_unit
from .runner import empty_output

__all__ = ["AcceleratorPool", "NoDeviceLeft", "PoolCounters", "chunk_runs"]

_log = logging.getLogger(__name__)

# What makes the pool drop a device: the link failed or went silent (LinkError, LinkTimeout,
# pyserial's errors; all OSErrors), the device stayed busy (BusyTimeout, a TimeoutError and so
# an OSError too) or refused a request (DeviceError). Any other exception is a bug or a bad
# argument, and stops the whole call.
_DROP_ERRORS = (OSError, DeviceError)
# A device takes about 1/_ROUNDS of its share of the rows still free at a time: the first chunks
# are large (few calls), the last ones small (the devices finish together).
_ROUNDS = 2
# No chunk is longer than this many runs, so that an interrupted or failed call does not wait
# for, or lose, a large piece of work.
_MAX_CHUNK_RUNS = 32


class NoDeviceLeft(RuntimeError):
    """Every device of the pool was dropped.

    Attributes
    ----------
    reasons : dict
        ``{url: text}``: why each device was dropped.
    """

    def __init__(self, what, reasons):
        self.reasons = dict(reasons)
        detail = "; ".join(f"{url}: {why}" for url, why in self.reasons.items())
        super().__init__(f"{what}: no device is left in the pool ({detail})")


@dataclasses.dataclass(frozen=True)
class PoolCounters:
    """What the last :meth:`AcceleratorPool.infer` cost, per device and in total.

    Attributes
    ----------
    total : InferCounters
        The sums over the devices; ``seconds`` is the wall time of the call, so
        ``total.rows_per_second`` is the pool's rate.
    devices : dict
        ``{url: InferCounters}`` of the chunks each device completed in that call (a device
        dropped during the call keeps the chunks it finished); ``seconds`` is the time the
        device spent on them.
    """

    total: InferCounters
    devices: dict


def chunk_runs(free_runs, share, max_runs=_MAX_CHUNK_RUNS):
    """Return how many runs to hand a device that has ``share`` of the pool's speed.

    About ``free_runs * share / 2``: half of the device's share of what is still free, at least
    one run and at most ``max_runs`` (nor more than ``free_runs``).

    Parameters
    ----------
    free_runs : int
        Runs (chunks of ``program.batch`` rows) not handed out yet, at least 1.
    share : float
        The device's rows per second over the sum of the live devices', in ``(0, 1]``.
    max_runs : int
        Upper bound.
    """
    return max(1, min(max_runs, free_runs, round(free_runs * share / _ROUNDS)))


class _Member:
    """One device of the pool and what the pool knows about it."""

    def __init__(self, acc, url, owned):
        self.acc = acc
        self.url = url
        self.owned = owned  # opened by the pool, so closed by it
        self.rate = None  # rows per second, as last measured
        self.chunks = []  # InferCounters of the chunks it completed in the current call


class _Queue:
    """Runs still to do in one call, handed out to the device threads.

    Runs ``[a, b)`` are rows ``[a * batch, min(b * batch, rows))``; a range given back by a
    dropped device goes to the front, so that the rows are redone first.
    """

    def __init__(self, runs):
        self.free = collections.deque([(0, runs)] if runs else [])
        self.busy = 0  # chunks in flight
        self.error = None  # an exception that stops the call
        self.cond = threading.Condition()

    def take(self, size):
        """Return the next ``(a, b)`` for a device, ``size(free_runs)`` runs at most; None when
        nothing is left or the call is stopping. Waits while only chunks in flight remain (one
        may come back)."""
        with self.cond:
            while not self.free and self.busy and self.error is None:
                self.cond.wait()
            if self.error is not None or not self.free:
                return None
            a, b = self.free.popleft()
            n = size(sum(end - start for start, end in self.free) + b - a)
            if b - a > n:
                self.free.appendleft((a + n, b))
                b = a + n
            self.busy += 1
            return a, b

    def done(self, chunk=None, error=None):
        """Close a chunk: finished (no arguments), given back (``chunk``) or failed
        (``error``: the call stops)."""
        with self.cond:
            self.busy -= 1
            if chunk is not None:
                self.free.appendleft(chunk)
            if error is not None and self.error is None:
                self.error = error
            self.cond.notify_all()

    def stop(self, error):
        with self.cond:
            if self.error is None:
                self.error = error
            self.cond.notify_all()


def _sum_counters(parts, seconds):
    fields = [f.name for f in dataclasses.fields(InferCounters) if f.name != "seconds"]
    return InferCounters(**{name: sum(getattr(c, name) for c in parts) for name in fields},
                         seconds=seconds)


_ALLOWED = ("a pyserial URL string, a transport (an object with read(size) and write(data), "
            "e.g. sim.inprocess.InProcessDevice) or an open device (with load, infer and "
            "counters, e.g. a host.Accelerator)")


def _is_open_device(device):
    """Whether ``device`` is driven as it is: it has ``load``, ``infer`` and ``counters``."""
    return all(callable(getattr(device, m, None)) for m in ("load", "infer", "counters"))


def _is_transport(device):
    return all(callable(getattr(device, m, None)) for m in ("read", "write"))


def _check_devices(devices):
    """Return ``[(device, url)]`` of the devices given, checked before anything is opened."""
    if isinstance(devices, str) or _is_open_device(devices) or _is_transport(devices):
        raise TypeError(f"devices must be a list of devices, not one {type(devices).__name__} "
                        f"(write [{devices!r}])")
    try:
        devices = list(devices)
    except TypeError:
        raise TypeError(f"devices must be a list of devices, not "
                        f"{type(devices).__name__}") from None
    if not devices:
        raise ValueError("AcceleratorPool needs at least one device (a pyserial URL or an "
                         "Accelerator); got none")
    checked, seen = [], set()
    for i, device in enumerate(devices):
        if not (isinstance(device, str) or _is_open_device(device) or _is_transport(device)):
            raise TypeError(f"devices[{i}] is a {type(device).__name__} ({device!r}); "
                            f"allowed: {_ALLOWED}")
        url = device if isinstance(device, str) else getattr(device, "url", None)
        if not isinstance(url, str):
            url = f"{type(device).__name__}@{id(device):#x}"
        if url in seen or any(device is other for other, _ in checked):
            raise ValueError(f"devices[{i}]: {url} is in the pool twice; each device may "
                             "appear once")
        seen.add(url)
        checked.append((device, url))
    return checked


def _keys(key, devices):
    """Return ``{url: key bytes or None}`` for the devices in ``[(device, url)]`` that the pool
    opens, from ``key`` (one key for all of them, or ``{url: key}``), read before anything is
    opened."""
    opened = [url for device, url in devices if not _is_open_device(device)]
    if key is None:
        return {}
    if not isinstance(key, collections.abc.Mapping):
        key = read_key(key)
        return dict.fromkeys(opened, key)
    for url in key:
        if url not in opened:
            raise ValueError(f"key[{url!r}]: no such device for the pool to open; allowed: "
                             f"the URLs it opens ({', '.join(map(repr, opened))})")
    return {url: None if k is None else read_key(k, f"key[{url!r}]") for url, k in key.items()}


def _open(device, url, **options):
    try:
        return Accelerator(device, progress=False, **options)
    except DeviceError as exc:  # e.g. REFUSED by hwgen serve: name the URL
        raise DeviceError(f"{url}: {exc.request}", exc.status) from None


class AcceleratorPool:
    """Several devices that run one program and share the rows of every :meth:`infer`.

    Parameters
    ----------
    devices : sequence of str, Transport or device
        pyserial URLs (``/dev/ttyUSB1``, ``socket://host:port`` of ``hwgen serve`` or of a
        simulated board) and transports (:class:`host.transport.Transport`, e.g.
        :class:`sim.inprocess.InProcessDevice`), for which the pool opens an
        :class:`Accelerator` and closes it, and open devices (anything with ``load(program)``,
        ``infer(x, outputs=...)`` and ``counters()`` returning :class:`InferCounters`, e.g. an
        :class:`Accelerator`), which it uses and leaves open; mixed as you like. At least one;
        no device twice.
    timeout, retries, baudrate
        For the devices the pool opens, as for :class:`Accelerator`. ``timeout`` is also how
        long a device may stay silent before it is dropped (times the attempts).
    config : AcceleratorConfig, optional
        When given, every device must have been built from it.
    key : bytes, str, os.PathLike or dict, optional
        For servers that ask for a key (``hwgen serve --key-file``): one key, or key file path,
        for every device the pool opens, or ``{url: key}`` for some of them (the others are
        opened without one); as for :class:`Accelerator`.

    Raises
    ------
    ValueError, TypeError
        For an empty pool, a device given twice or something that is none of these, or a bad
        key (file), before anything is opened.
    LinkError, IncompatibleDevice, DeviceError
        If a URL cannot be opened, does not answer, is refused (a board that ``hwgen serve``
        shares with another client), rejects the key (:class:`~host.auth.AuthenticationError`)
        or was built from another ``config``; the message names the URL. The devices opened so
        far are closed again.

    Notes
    -----
    :meth:`load` requires every device to have the same configuration hash. Devices dropped
    during a call stay out of the pool; :attr:`dropped` says why.
    """

    def __init__(self, devices, *, timeout=5.0, retries=3, config=None, baudrate=None,
                 key=None):
        devices = _check_devices(devices)
        keys = _keys(key, devices)
        self._members = []
        self._dropped = {}
        self._program = None
        self._last = PoolCounters(InferCounters(), {})
        self._closed = False
        try:
            for device, url in devices:
                if _is_open_device(device):
                    found = getattr(device, "config_hash", None)
                    if config is not None and found is not None and found != config.hash:
                        raise IncompatibleDevice(
                            f"the device at {url} was built from config hash {found}, not from "
                            f"{config.name} (config hash {config.hash})", device=found,
                            expected=config.hash)
                    self._members.append(_Member(device, url, owned=False))
                else:
                    acc = _open(device, url, timeout=timeout, retries=retries, config=config,
                                baudrate=baudrate, key=keys.get(url))
                    self._members.append(_Member(acc, acc.url, owned=True))
        except BaseException:
            self.close()
            raise

    # -- properties ------------------------------------------------------------------------------

    @property
    def devices(self):
        """The :class:`Accelerator` s still in the pool, in the order given."""
        return [m.acc for m in self._members]

    @property
    def urls(self):
        """The URLs of the devices still in the pool."""
        return [m.url for m in self._members]

    @property
    def dropped(self):
        """``{url: text}``: the devices dropped so far and why."""
        return dict(self._dropped)

    @property
    def program(self):
        """The program loaded by :meth:`load`, or None."""
        return self._program

    @property
    def rates(self):
        """``{url: rows per second}`` of each live device as last measured (None: not yet)."""
        return {m.url: m.rate for m in self._members}

    # -- loading ---------------------------------------------------------------------------------

    def load(self, program):
        """Load ``program`` on every device, all at once.

        Parameters
        ----------
        program : hwgen.compiler.Program or path-like
            A program, or the ``.npz`` file :meth:`Program.save` wrote (read once).

        Raises
        ------
        IncompatibleDevice
            Before anything is written, if the devices were built from different configurations
            or the program was compiled for another one (naming the URLs and hashes).
        NoDeviceLeft
            If every device failed while loading (a failing device is dropped).
        TypeError, ValueError, OSError
            If ``program`` is neither a program nor a readable program file.
        """
        self._check_open("load")
        program = as_program(program, "load")
        self._check_hashes(program)
        self._program = None
        errors = self._each(lambda member: member.acc.load(program))
        for member, exc in errors.items():
            if not isinstance(exc, _DROP_ERRORS):
                raise exc
            self._drop(member, "load", exc)
        if not self._members:
            raise NoDeviceLeft("load", self._dropped)
        self._program = program

    def _check_hashes(self, program):
        if not self._members:
            raise NoDeviceLeft("load", self._dropped)
        hashes = {m.url: getattr(m.acc, "config_hash", None) for m in self._members}
        hashes = {url: h for url, h in hashes.items() if h is not None}
        if not hashes:
            return
        if len(set(hashes.values())) > 1:
            listing = ", ".join(f"{url}: {h}" for url, h in hashes.items())
            raise IncompatibleDevice(
                f"the pool's devices were built from different configurations ({listing}); "
                "one program runs on all of them, so they must share one config hash",
                device=listing, expected=program.config_hash)
        device_hash = next(iter(hashes.values()))
        if program.config_hash != device_hash:
            raise IncompatibleDevice(
                f"the program was compiled for {program.config.name} (config hash "
                f"{program.config_hash}); the pool's devices ({', '.join(hashes)}) were built "
                f"from config hash {device_hash}", device=device_hash,
                expected=program.config_hash)

    def _each(self, func):
        """Run ``func(member)`` for every live member, each in its own thread; return
        ``{member: exception}`` of those that raised."""
        members = list(self._members)
        _, errors = fan_out(lambda _, member: func(member), members, prefix="pool")
        return {members[i]: exc for i, exc in errors.items()}

    def _drop(self, member, stage, exc):
        if member not in self._members:
            return
        self._members.remove(member)
        why = f"dropped during {stage}: {type(exc).__name__}: {exc}"
        self._dropped[member.url] = why
        _log.warning("%s: %s", member.url, why)
        if member.owned:
            member.acc.close()

    # -- inference -------------------------------------------------------------------------------

    def infer(self, x, outputs="last", *, output=None):
        """Run the loaded program on every sample of ``x`` across the devices, in order.

        Parameters
        ----------
        x : array_like of int, shape (M, *program.input.sample_shape)
            As for :meth:`Accelerator.infer`: rows ``(M, K)`` or NHWC images ``(M, H, W,
            C)``; ``M`` may be 0 (bf16 values for a ``dtype="bf16"`` program).
        outputs : {"last", "all"}
            As for :meth:`Accelerator.infer`: ``"all"`` also reads every layer's output of
            each run (a program compiled with ``readout=True``).
        output : {None, "scores", "argmax"} or ("top_k", k)
            As for :meth:`Accelerator.infer`: the classes instead of the scores (None: the
            program's output mode).

        Returns
        -------
        numpy.ndarray of int64, shape (M, *program.output.sample_shape), or list of them
            ``[i]`` is the network's output for ``x[i]``, whichever device ran it; with
            ``outputs="all"``, one such array per layer (its own sample shape); for a class
            output, ``(M,)`` indices of argmax or ``(M, k)`` of top-k (floats for a
            ``dtype="bf16"`` program's scores, as for :meth:`Accelerator.infer`).

        Raises
        ------
        RuntimeError
            If no program is loaded or the pool is closed.
        ValueError
            Before anything is sent, if ``x`` does not fit the program (shape, dtype, range),
            or ``outputs`` or ``output`` is not allowed for it (as for
            :meth:`Accelerator.infer`).
        NoDeviceLeft
            If every device was dropped before all rows were done; it names each device and
            why it was dropped.
        """
        self._check_open("infer")
        program = self._program
        if program is None:
            raise RuntimeError("infer: no program is loaded; call load(program) first")
        mode = infer_mode(program, outputs, output, False)
        kept = readout_specs(program, outputs, "infer")
        x = check_samples(program, x, "infer")
        rows = len(x)
        outs = [empty_output(s, mode if i == len(kept) - 1 else "scores", rows,
                             output_dtype(program, s)) for i, s in enumerate(kept)]
        start = time.perf_counter()
        for member in self._members:
            member.chunks = []
        members = list(self._members)
        queue = _Queue(math.ceil(rows / program.batch))
        options = {"outputs": outputs, "batch": program.batch, "unit": sample_unit(program),
                   "output": output}
        try:  # Ctrl-C stops the queue handing out chunks, and the threads end
            fan_out(lambda _, m: self._drive(m, queue, x, outs, **options), members,
                    stop=queue.stop, prefix="pool")
        finally:
            self._last = PoolCounters(
                total=_sum_counters([c for m in members for c in m.chunks],
                                    time.perf_counter() - start),
                devices={m.url: _sum_counters(m.chunks, sum(c.seconds for c in m.chunks))
                         for m in members})
        if queue.error is not None:
            raise queue.error
        if queue.free:
            raise NoDeviceLeft(f"infer of {rows} {sample_unit(program)}", self._dropped)
        return outs if outputs == "all" else outs[0]

    def _drive(self, member, queue, x, outs, *, outputs, batch, unit, output):
        """One device's thread: take chunks until none is left; drop the device if it fails."""
        rows = len(x)
        asked = {} if output is None else {"output": output}  # None: the program's mode
        while True:
            chunk = queue.take(lambda free, m=member: chunk_runs(free, self._share(m)))
            if chunk is None:
                return
            lo, hi = chunk[0] * batch, min(chunk[1] * batch, rows)
            try:
                ys = member.acc.infer(x[lo:hi], outputs=outputs, **asked)
            except _DROP_ERRORS as exc:
                with queue.cond:
                    self._drop(member, f"infer ({unit} {lo}..{hi - 1} of {rows})", exc)
                queue.done(chunk=chunk)
                return
            except BaseException as exc:  # not the device's fault: the call stops
                queue.done(error=exc)
                return
            for out, y in zip(outs, ys if outputs == "all" else [ys], strict=True):
                out[lo:hi] = y
            counters = member.acc.counters()
            member.chunks.append(counters)
            with queue.cond:  # the rate is read by the other threads' chunk_runs
                done = member.chunks
                member.rate = sum(c.rows for c in done) / max(sum(c.seconds for c in done),
                                                             1e-9)
            queue.done()

    def _share(self, member):
        """``member``'s rows per second over the sum of the live devices' (under the lock)."""
        known = [m.rate for m in self._members if m.rate]
        guess = sum(known) / len(known) if known else 1.0  # unmeasured: like the others
        rates = {m: m.rate or guess for m in self._members}
        return rates.get(member, guess) / (sum(rates.values()) or guess)

    # -- counters and closing --------------------------------------------------------------------

    def counters(self):
        """Return the :class:`PoolCounters` of the last :meth:`infer` (zeros before any)."""
        return self._last

    def _check_open(self, what):
        if self._closed:
            raise RuntimeError(f"{what}: the pool is closed")

    def close(self):
        """Close the devices the pool opened (safe to call more than once)."""
        self._closed = True
        for member in getattr(self, "_members", []):
            if member.owned:
                with contextlib.suppress(OSError):
                    member.acc.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        dropped = f", {len(self._dropped)} dropped" if self._dropped else ""
        return f"<AcceleratorPool of {len(self._members)} device(s){dropped}>"
