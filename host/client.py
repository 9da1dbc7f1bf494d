"""Low-level host interface to a device: one method per command of :mod:`hwgen.protocol`.

:class:`DeviceClient` works over any byte pipe with pyserial's ``write(bytes)`` / ``read(n)``
interface (:class:`host.transport.Transport`): a pyserial URL it opens (``/dev/ttyUSB1``,
``socket://``, ``loop://``), a ``serial.Serial``, the in-process device of
:mod:`sim.inprocess` or the simulated gateware of the tests. Every constant comes from
:mod:`hwgen.protocol`.

Failure handling (:func:`host.pipeline.pipeline`, with the client's
:class:`~host.frame_plan.FramePlan`, one per link):

* a response with a bad payload CRC, a BAD_CRC status (the request was damaged on the way), or
  no response within a few times the usual wait makes the client send the request again, with a
  new sequence number, cut in smaller pieces (WRITE and READ in fewer words): each failure
  halves the payload size the link's requests are cut to, intact answers double it back.
  Responses with another sequence number or opcode (late answers to earlier attempts) are
  skipped;
* WRITE, READ, INFO, COUNTERS and RESET are idempotent, so sending them again is safe. RUN is not:
  when its answer is lost the client asks the device (COUNTERS' run count) whether it started,
  and sends it again only if it did not;
* any other error status raises :class:`DeviceError`; a dead link raises :class:`LinkTimeout`
  (``retries + 1`` waits of ``timeout`` in a row that heard nothing) or :class:`LinkError`
  (``4 * (retries + 1)`` failed attempts in a row, naming the sizes tried and the damage seen).
  Nothing blocks for longer than about ``2 * (retries + 1) * timeout``.
"""

import time

import numpy as np

from hwgen.memmap import Region
from hwgen.protocol import (
    Opcode,
    Status,
    encode_request,
    pack_run,
    pack_words,
    unpack_counters,
    unpack_words,
)

from .errors import BusyTimeout, DeviceError, LinkError, LinkTimeout
from .frame_plan import FramePlan, describe_damage
from .frames import ResponseDecoder
from .info import unpack_info
from .pieces import Exchange, word_reads, word_writes
from .pipeline import DEAD_AFTER, pipeline
from .transport import open_transport

__all__ = ["BusyTimeout", "DeviceClient", "DeviceError", "LinkError", "LinkTimeout"]

# How long one port.read() may block at most, so that deadlines are kept on ports with long
# timeouts.
_POLL_SECONDS = 0.005


class DeviceClient:
    """Talk to one device over a byte pipe.

    Parameters
    ----------
    port : str or Transport
        A pyserial URL, which the client opens (and :meth:`close` closes), or an object with
        ``write(bytes)`` and ``read(n) -> bytes`` (fewer bytes on timeout); a ``timeout``
        attribute, if it has one, is set to a short poll interval.
    timeout : float
        Seconds to wait for the answer to one attempt at most (the first one's, before the
        usual wait is known; see :meth:`FramePlan.attempt_timeout
        <host.frame_plan.FramePlan.attempt_timeout>`).
    retries : int
        Attempts after the first one that may hear nothing (see the module for damage).

    Attributes
    ----------
    stats : dict
        Counts of ``"retries"`` (attempts sent again), ``"discarded"`` (answers to other
        requests) and ``"corrupt"`` answers, for tests and diagnostics.
    plan : FramePlan
        The link's payload size and answer wait, and the damage it has seen.
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
        self.plan = FramePlan(timeout)
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

    def flush(self, nbytes):
        """Send ``nbytes`` zeros: they complete a frame that the device holds only partly (a
        byte of it was lost: the device answers it BAD_CRC) and are skipped otherwise."""
        self.port.write(bytes(nbytes))

    def _exchange(self, opcode, payload):
        """Send one attempt; return the matching :class:`Frame`, or None once nothing has come
        for the plan's attempt timeout (after sending zeros, see :meth:`flush`)."""
        seq = self.next_seq()
        # Anything still buffered belongs to earlier attempts.
        self._decoder.reset()
        frame = encode_request(opcode, seq, payload)
        self.port.write(frame)
        start = last = time.monotonic()
        wait = self.plan.attempt_timeout([opcode], len(frame), guess=opcode != Opcode.RUN)
        while time.monotonic() - last < wait:
            data = self.port.read(self._decoder.wanted)
            if data:
                last = time.monotonic()
            for answer in self._decoder.feed(data):
                if answer.seq == seq and answer.opcode == opcode:
                    self.plan.intact(opcode, time.monotonic() - start)
                    return answer
                self.stats["discarded"] += 1
        self.flush(len(frame))
        return None

    def request(self, opcode, payload, what):
        """Send an idempotent request until an intact answer with a status other than BAD_CRC
        arrives (see the module); return the answer's payload.

        Raises
        ------
        DeviceError
            For an error status, naming ``what``.
        LinkError, LinkTimeout
            When the link is dead (see the module).
        """
        return pipeline(self, [Exchange(opcode, payload, what, 0)], 0)[0]

    # -- commands --------------------------------------------------------------------------------

    def info(self, refresh=False):
        """Return the device's :class:`~host.info.DeviceInfo` (cached after the first call)."""
        if self._info is None or refresh:
            self._info = unpack_info(self.request(Opcode.INFO, b"", "INFO"))
            self.plan.device(self._info.max_payload, self._info.baud)
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
        pipeline(self, word_writes(geometry, addr, raw, self.plan.limit), 0)

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
        reads = word_reads(geometry, addr, count, self.plan.limit)
        words = []
        for read, raw in zip(reads, pipeline(self, reads, 0), strict=True):
            if len(raw) != read.data_bytes:
                raise LinkError(f"{read.what}: {len(raw)} bytes in the answer, expected "
                                f"{read.data_bytes}")
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
        attempts = DEAD_AFTER * (self.retries + 1)   # as a dead link counts in pipeline()
        for attempt in range(attempts):
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
                    self.plan.damaged("bad_crc")
                    continue
                raise DeviceError(what, frame.status)
            if frame is not None:
                self.stats["corrupt"] += 1
                problem = "the answer was damaged"
            self.plan.damaged("lost" if frame is None else "damaged")
            # The answer is lost or damaged: ask the device rather than guess.
            runs = self.counters().runs
            if runs == before + 1:
                return
            if runs != before:
                raise LinkError(f"{what}: the answer was lost and the device's run count went "
                                f"from {before} to {runs}; cannot tell whether this RUN started")
        raise LinkError(f"no intact answer to {what} in {attempts} attempt(s); last problem: "
                        f"{problem or 'no answer'}; damage seen: "
                        f"{describe_damage(self.plan.damage)}")

    def counters(self):
        """Return the device's :class:`~hwgen.protocol.CounterValues`."""
        counters = unpack_counters(self.request(Opcode.COUNTERS, b"", "COUNTERS"))
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
        self.request(Opcode.RESET, b"", "RESET")
        self._runs = 0

    def close(self):
        """Close the port if the client opened it from a URL."""
        if self._owned:
            self.port.close()
