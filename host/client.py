"""Low-level host interface to a device: one method per command of :mod:`hwgen.protocol`.

:class:`DeviceClient` works over any byte pipe with pyserial's ``write(bytes)`` / ``read(n)``
interface (:class:`host.transport.Transport`): a pyserial URL it opens (``/dev/ttyUSB1``,
``socket://``, ``loop://``), a ``serial.Serial``, the in-process device of
:mod:`sim.inprocess` or the simulated gateware of the tests. Every constant comes from
:mod:`hwgen.protocol`.

Failure handling:

* a response with a bad payload CRC, or a BAD_CRC status (the request was damaged on the way),
  makes the client send the request again, with a new sequence number, at most ``retries`` times;
  so does silence for ``timeout`` seconds. Responses with another sequence number or opcode (late
  answers to earlier attempts) are skipped;
* WRITE, READ, INFO, COUNTERS and RESET are idempotent, so sending them again is safe. RUN is not:
  when its answer is lost the client asks the device (COUNTERS' run count) whether it started,
  and sends it again only if it did not;
* any other error status raises :class:`DeviceError`; running out of attempts raises
  :class:`LinkTimeout` (silence) or :class:`LinkError` (only damaged answers). Nothing blocks for
  longer than about ``(retries + 1) * timeout``.
"""

import time

import numpy as np

from hwgen.memmap import Region
from hwgen.protocol import (
    STATUS_TEXT,
    Opcode,
    Status,
    encode_request,
    pack_access,
    pack_read,
    pack_run,
    pack_words,
    unpack_counters,
    unpack_words,
)

from .frames import ResponseDecoder
from .info import unpack_info
from .transport import open_transport

__all__ = ["BusyTimeout", "DeviceClient", "DeviceError", "LinkError", "LinkTimeout"]

# How long one port.read() may block at most, so that deadlines are kept on ports with long
# timeouts.
_POLL_SECONDS = 0.05


class DeviceError(RuntimeError):
    """The device answered a request with an error status.

    Attributes
    ----------
    request : str
        The request, e.g. ``"WRITE ACT[0:16]"``.
    status : Status or int
    """

    def __init__(self, request, status):
        self.request = request
        self.status = status
        if isinstance(status, Status):
            text = f"{status.name} ({STATUS_TEXT[status]})"
        else:
            text = f"unknown status {status:#04x}"
        super().__init__(f"{request} failed: {text}")


class LinkError(OSError):
    """No intact answer to a request after every attempt, or an answer that makes no sense."""


class LinkTimeout(LinkError, TimeoutError):
    """No answer at all to a request after every attempt."""


class BusyTimeout(TimeoutError):
    """The device stayed busy for longer than allowed."""


class DeviceClient:
    """Talk to one device over a byte pipe.

    Parameters
    ----------
    port : str or Transport
        A pyserial URL, which the client opens (and :meth:`close` closes), or an object with
        ``write(bytes)`` and ``read(n) -> bytes`` (fewer bytes on timeout); a ``timeout``
        attribute, if it has one, is set to a short poll interval.
    timeout : float
        Seconds to wait for the answer to one attempt; longer than the device's frame timeout.
    retries : int
        Attempts after the first one.

    Attributes
    ----------
    stats : dict
        Counts of ``"retries"``, ``"discarded"`` (answers to other requests) and ``"corrupt"``
        answers, for tests and diagnostics.
    """

    def __init__(self, port, timeout=2.0, retries=3):
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an int >= 0, not {retries!r}")
        self.port, self.url = open_transport(port)
        self._owned = isinstance(port, str)
        self.timeout = timeout
        self.retries = retries
        if hasattr(self.port, "timeout"):
            self.port.timeout = min(timeout, _POLL_SECONDS)
        self.stats = {"retries": 0, "discarded": 0, "corrupt": 0}
        self._seq = 0
        self._decoder = ResponseDecoder()
        self._info = None
        self._runs = None  # the device's run count as last seen, to tell whether a RUN started

    # -- transport -------------------------------------------------------------------------------

    def next_seq(self):
        """Return the sequence number of the next request sent (each request takes its own)."""
        seq = self._seq
        self._seq = (self._seq + 1) & 0xFF
        return seq

    def _exchange(self, opcode, payload):
        """Send one attempt; return the matching :class:`Frame`, or None on silence."""
        seq = self.next_seq()
        # Anything still buffered belongs to earlier attempts.
        self._decoder.reset()
        self.port.write(encode_request(opcode, seq, payload))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for frame in self._decoder.feed(self.port.read(self._decoder.wanted)):
                if frame.seq == seq and frame.opcode == opcode:
                    return frame
                self.stats["discarded"] += 1
        return None

    def request(self, opcode, payload, what):
        """Send an idempotent request until an intact answer with a status other than BAD_CRC
        arrives (at most ``retries`` times more); return the answer's payload.

        Raises
        ------
        DeviceError
            For an error status, naming ``what``.
        LinkError, LinkTimeout
            When every attempt's answer was damaged, or none came.
        """
        return self._request(opcode, payload, what)

    def _request(self, opcode, payload, what):
        """Send a request until an intact answer with a status other than BAD_CRC arrives.

        Returns the response payload; raises :class:`DeviceError` for an error status.
        """
        problem = None
        for attempt in range(self.retries + 1):
            if attempt:
                self.stats["retries"] += 1
            frame = self._exchange(opcode, payload)
            if frame is None:
                continue
            if not frame.crc_ok:
                self.stats["corrupt"] += 1
                problem = "the answer was damaged"
            elif frame.status == Status.OK:
                return frame.payload
            elif frame.status == Status.BAD_CRC:
                problem = "the device received a damaged request (BAD_CRC)"
            else:
                raise DeviceError(what, frame.status)
        raise self._give_up(what, problem)

    def _give_up(self, what, problem):
        attempts = self.retries + 1
        if problem is None:
            return LinkTimeout(f"no answer to {what} within {self.timeout:g} s, "
                               f"{attempts} attempt(s)")
        return LinkError(f"no intact answer to {what} in {attempts} attempt(s); "
                         f"last problem: {problem}")

    # -- commands --------------------------------------------------------------------------------

    def info(self, refresh=False):
        """Return the device's :class:`~host.info.DeviceInfo` (cached after the first call)."""
        if self._info is None or refresh:
            self._info = unpack_info(self._request(Opcode.INFO, b"", "INFO"))
        return self._info

    def check_config(self, config):
        """Raise ValueError listing every way the device differs from ``config``."""
        problems = self.info().mismatches(config)
        if problems:
            raise ValueError(f"the device was not built from this configuration ({config.name}): "
                             + "; ".join(problems))

    def _geometry(self, region, addr, count, verb):
        try:
            region = Region(region)
        except ValueError:
            raise ValueError(f"{verb}: region {region!r} is none of "
                             + ", ".join(r.name for r in Region)) from None
        geometry = self.info().regions[region]
        if isinstance(addr, bool) or not isinstance(addr, int | np.integer) or addr < 0:
            raise ValueError(f"{verb} {region.name}: addr must be an int >= 0, not {addr!r}")
        if addr + count > geometry.depth:
            raise ValueError(f"{verb} {region.name}[{addr}:{addr + count}]: {count} words at "
                             f"{addr} run past the region's depth of {geometry.depth} words")
        return geometry

    def write(self, region, addr, words):
        """Write ``words`` to ``region`` from word ``addr`` on, in as many WRITEs as needed.

        Parameters
        ----------
        region : Region or int
        addr : int
        words : sequence of int or NumPy integer array
            Each in ``0 .. 2**word_bits - 1`` (the raw bits of the word).

        Raises
        ------
        ValueError
            Before anything is sent, if the region is unknown, the range runs past its depth or a
            word does not fit, naming which.
        DeviceError, LinkError, LinkTimeout
        """
        array = np.asarray(words, dtype=object)
        if array.ndim != 1:
            raise ValueError(f"WRITE: words must be a 1-D sequence, not of shape {array.shape}")
        words = list(array)
        geometry = self._geometry(region, addr, len(words), "WRITE")
        name = f"WRITE {geometry.region.name}"
        try:
            raw = pack_words(geometry, words)  # checks every word before anything is sent
        except ValueError as error:
            raise ValueError(f"{name}[{addr}:{addr + len(words)}]: {error}") from None
        chunk = self.info().write_chunk_words(geometry.region)
        nbytes = geometry.word_bytes
        for start in range(0, len(words), chunk):
            n = min(chunk, len(words) - start)
            at = addr + start
            payload = pack_access(geometry.region, at, n) + raw[start * nbytes:(start + n) * nbytes]
            self._request(Opcode.WRITE, payload, f"{name}[{at}:{at + n}]")

    def read(self, region, addr, count):
        """Return ``count`` words of ``region`` from ``addr`` on, in as many READs as needed.

        Returns
        -------
        numpy.ndarray
            ``uint64`` when the region's words have at most 64 bits, else Python ints in an
            ``object`` array.

        Raises
        ------
        ValueError
            If the region is unknown, ``count`` is negative or the range runs past its depth.
        DeviceError, LinkError, LinkTimeout
        """
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise ValueError(f"READ: count must be an int >= 0, not {count!r}")
        geometry = self._geometry(region, addr, count, "READ")
        chunk = self.info().read_chunk_words(geometry.region)
        words = []
        for start in range(0, count, chunk):
            n = min(chunk, count - start)
            at = addr + start
            what = f"READ {geometry.region.name}[{at}:{at + n}]"
            raw = self._request(Opcode.READ, pack_read(geometry, at, n), what)
            if len(raw) != n * geometry.word_bytes:
                raise LinkError(f"{what}: {len(raw)} bytes in the answer, expected "
                                f"{n * geometry.word_bytes}")
            words += unpack_words(geometry, raw)
        return np.array(words, dtype=np.uint64 if geometry.word_bits <= 64 else object)

    def run(self, batch):
        """Start the program in PROGRAM on ``batch`` rows; return at once (see :meth:`wait_idle`).

        Raises
        ------
        ValueError
            If ``batch`` is not in ``1 .. acc_depth``.
        DeviceError
            BUSY, NO_PROGRAM, BAD_BATCH.
        LinkError, LinkTimeout
            Also when the answer was lost and the device cannot tell whether this RUN started.
        """
        acc_depth = self.info().acc_depth
        if isinstance(batch, bool) or not isinstance(batch, int | np.integer) \
                or not 1 <= batch <= acc_depth:
            raise ValueError(f"RUN: batch must be an int in 1..{acc_depth} (acc_depth), "
                             f"not {batch!r}")
        what = f"RUN batch={batch}"
        if self._runs is None:
            self.counters()
        problem = None
        for attempt in range(self.retries + 1):
            if attempt:
                self.stats["retries"] += 1
            before = self._runs
            frame = self._exchange(Opcode.RUN, pack_run(int(batch)))
            if frame is not None and frame.crc_ok:
                if frame.status == Status.OK:
                    self._runs = before + 1
                    return
                if frame.status == Status.BAD_CRC:
                    # the device refused the damaged request, so it did not start
                    problem = "the device received a damaged request (BAD_CRC)"
                    continue
                raise DeviceError(what, frame.status)
            if frame is not None:
                self.stats["corrupt"] += 1
                problem = "the answer was damaged"
            # The answer is lost or damaged: ask the device rather than guess.
            runs = self.counters().runs
            if runs == before + 1:
                return
            if runs != before:
                raise LinkError(f"{what}: the answer was lost and the device's run count went "
                                f"from {before} to {runs}; cannot tell whether this RUN started")
        raise self._give_up(what, problem)

    def counters(self):
        """Return the device's :class:`~hwgen.protocol.CounterValues`."""
        counters = unpack_counters(self._request(Opcode.COUNTERS, b"", "COUNTERS"))
        self._runs = counters.runs
        return counters

    def wait_idle(self, timeout=10.0, interval=0.001):
        """Poll COUNTERS until the device is idle; return the final counters.

        Raises
        ------
        BusyTimeout
            If the device is still busy after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            counters = self.counters()
            if not counters.busy:
                return counters
            if time.monotonic() >= deadline:
                raise BusyTimeout(f"the device is still busy after {timeout:g} s "
                                  f"({counters.cycles} busy cycles since reset)")
            time.sleep(interval)

    def reset(self):
        """Clear the counters, the run count and the program-loaded flag of the device."""
        self._request(Opcode.RESET, b"", "RESET")
        self._runs = 0

    def close(self):
        """Close the port if the client opened it from a URL."""
        if self._owned:
            self.port.close()
