"""Requests in flight, each sent again in smaller pieces when the link damages it.

The UART is full duplex: while a device streams one answer out (a FETCH's values, CLASSES'
indices), the bytes of the next requests (the next chunk's LOADs) can stream in, and wait in its
receive FIFO (INFO's ``rx_fifo``) until the frame engine takes them. :func:`pipeline` sends a
list of idempotent requests that do not depend on one another's order that way (``window``
bytes ahead of the oldest unanswered one; 0: one at a time) and returns their answers in order.

The device answers in order, so an answer tells that every request sent before it and not yet
answered is lost (its header was damaged, or a byte dropped from the one before it swallowed
its start); a damaged answer or a BAD_CRC status tells that request's frame was damaged; and an
answer that does not come within :meth:`FramePlan.attempt_timeout
<host.frame_plan.FramePlan.attempt_timeout>` (a few times the usual wait) tells that everything
in flight is lost. Then the host sends zeros as long as the longest frame in flight (they
complete a frame the device holds only partly, which it answers BAD_CRC, and are skipped
otherwise) and sends each failed request again on its own, in pieces of at most the plan's
payload size, which every failure halves (:mod:`host.frame_plan`; :mod:`host.pieces` cuts them),
so that only the damaged piece goes again, smaller; the pieces' answers make the request's.
Answers to attempts given up on are skipped by their sequence numbers.

The link counts as dead, and :class:`~host.errors.LinkError` names the request, the piece sizes
tried and the damage seen, after :data:`DEAD_AFTER` ``* (retries + 1)`` damaged or overtaken
attempts in a row with no intact answer between them; :class:`~host.errors.LinkTimeout` once
no frame at all has come for ``(retries + 1) * timeout`` (the waits that hear none double each
time, up to ``timeout``).
"""

import collections
import time

from hwgen.protocol import FRAME_OVERHEAD, Opcode, Status, encode_request

from .errors import DeviceError, LinkError, LinkTimeout
from .frame_plan import describe_damage
from .frames import ResponseDecoder
from .pieces import Exchange

__all__ = ["DEAD_AFTER", "pipeline"]

#: Failed attempts in a row, per attempt a request is allowed (``retries + 1``), after which the
#: link counts as dead: at 1 % of the bytes damaged, a frame of 90 bytes (a LOAD of a row of 64
#: values cannot be cut) fails two times in three, and 64 failures in a row (three retries) come
#: once in 10**11.
DEAD_AFTER = 16
# Zeros sent behind the last request in flight on a link that damages frames.
_TRAILER = 4
# The probe sent behind them: a small request that changes nothing.
_PROBE = Exchange(Opcode.COUNTERS, b"", "a probe (COUNTERS)", 0)


def pipeline(client, exchanges, window):
    """Send ``exchanges`` (:class:`host.pieces.Exchange` s: idempotent requests, in any order)
    through ``client`` (its port, sequence numbers, :class:`~host.frame_plan.FramePlan`,
    ``retries``, ``timeout`` and ``stats``) and return the payload of each answer, in order.

    At most ``window`` bytes of requests are sent beyond the oldest request not yet answered
    (the device's receive FIFO); with ``window`` 0 each request waits for the last answer.

    Raises
    ------
    DeviceError
        For an answer with an error status (naming the request or piece).
    LinkError, LinkTimeout
        When the link is dead (see the module).
    """
    return _Pipeline(client, window).run(exchanges)


class _Piece:
    """A request, or a piece of one: where its answer goes, and (for a request) the sizes
    tried and the damage seen."""

    __slots__ = ("answers", "damage", "exchange", "index", "join", "left", "parent", "probe",
                 "refused", "result", "root", "sizes")

    def __init__(self, exchange, parent=None, index=0, *, probe=False):
        self.exchange, self.parent, self.index, self.probe = exchange, parent, index, probe
        self.root = self if parent is None else parent.root
        self.answers = self.join = self.result = None
        self.left = 0
        self.refused = False
        if parent is None:
            self.damage, self.sizes = collections.Counter(), set()


class _Sent:
    """A piece in flight: its sequence number and its frame's bytes."""

    __slots__ = ("piece", "seq", "size")

    def __init__(self, piece, seq, size):
        self.piece, self.seq, self.size = piece, seq, size


class _Pipeline:
    def __init__(self, client, window):
        self.client = client
        self.plan = client.plan
        self.window = window
        self.decoder = ResponseDecoder()
        self.ready = collections.deque()   # frames decoded, not yet looked at
        self.streak = 0                    # failed attempts since the last intact answer
        self.silent = 0                    # waits in a row that heard no frame
        self.heard = time.monotonic()      # when the last frame came (or the start)
        self.timed_out = {}                # seq -> opcode of attempts given up on by timeout
        self.dead_after = DEAD_AFTER * (client.retries + 1)

    def run(self, exchanges):
        roots = [_Piece(e) for e in exchanges]
        queue, flight = collections.deque(roots), collections.deque()
        while queue or any(not sent.piece.probe for sent in flight):
            self._send(queue, flight)
            frame, waited = self._wait(flight)
            if frame is None:
                queue.extendleft(reversed(self._timed_out(flight)))
                continue
            k = next((i for i, sent in enumerate(flight) if sent.seq == frame.seq
                      and sent.piece.exchange.opcode == frame.opcode), None)
            if k is None:
                self._late(frame)
                continue
            again = []
            for _ in range(k):   # sent before the answered one: lost on the way
                again += self._failed(flight.popleft(), "lost")
            sent = flight.popleft()
            if sent.piece.probe:
                pass             # it has told what it could
            elif not frame.crc_ok:
                again += self._failed(sent, "damaged")
            elif frame.status == Status.BAD_CRC:
                again += self._failed(sent, "bad_crc")
            elif frame.status != Status.OK and self.plan.damaging and not sent.piece.refused:
                # On a link that damages frames a refusal may be of a damaged frame whose CRC
                # happened to match (one in 65,536 of those whose bytes shifted): once more.
                sent.piece.refused = True
                again += self._failed(sent, "refused")
            elif frame.status != Status.OK:
                raise DeviceError(sent.piece.exchange.what, frame.status)
            else:
                self.streak = 0
                self.plan.intact(frame.opcode, waited)
                _deliver(sent.piece, frame.payload)
            queue.extendleft(reversed(again))
        return [root.result for root in roots]

    def _send(self, queue, flight):
        """Send the queue's next pieces while the window allows (one at least); on a link that
        damages frames, a probe and zeros behind the last one."""
        sent = False
        while queue:
            size = FRAME_OVERHEAD + len(queue[0].exchange.payload)
            ahead = [s.size for s in flight if not s.piece.probe]   # (probes hold no one up)
            if ahead and sum(ahead) - ahead[0] + size > self.window:
                break
            self._write(queue.popleft(), flight)
            sent = True
        if sent and self.plan.damaging:
            # The last request's answer may not come (its header damaged): a probe's answer
            # behind it tells so at once, where a timeout would (the device's receive FIFO
            # holds its few bytes whatever the window). A byte dropped from the last frame
            # would leave the device waiting for one: zeros complete such a frame (answered
            # BAD_CRC) and are skipped otherwise.
            self._write(_Piece(_PROBE, probe=True), flight)
            self.client.port.write(bytes(_TRAILER))

    def _write(self, piece, flight):
        seq = self.client.next_seq()
        self.timed_out.pop(seq, None)   # (a number taken again after 256 requests)
        self.client.port.write(encode_request(piece.exchange.opcode, seq,
                                              piece.exchange.payload))
        piece.root.sizes.add(piece.exchange.data_bytes)
        flight.append(_Sent(piece, seq, FRAME_OVERHEAD + len(piece.exchange.payload)))

    def _wait(self, flight):
        """Return the next answer frame and the seconds waited for it, or ``(None, seconds)``
        once no byte has arrived for the attempt's timeout; raise :class:`LinkTimeout` once no
        frame has come for ``(retries + 1) * timeout``."""
        client = self.client
        timeout = self.plan.attempt_timeout({sent.piece.exchange.opcode for sent in flight},
                                            sum(sent.size for sent in flight), self.silent)
        start = last = time.monotonic()
        while not self.ready:
            now = time.monotonic()
            # On a link that damages frames an answer that stops half way lost a byte; on a
            # clean one it is only slow (a gate-level board, a USB bridge's latency timer).
            stalled = self.decoder.pending and self.plan.damaging
            if now - last >= (min(timeout, self.plan.stall_timeout()) if stalled else timeout):
                self.silent += 1
                if now - self.heard >= (client.retries + 1) * client.timeout * (1 - 1e-9):
                    what = flight[0].piece.root.exchange.what
                    raise LinkTimeout(f"no answer to {what} within {client.timeout:g} s, "
                                      f"{self.silent} attempt(s)")
                return None, now - start
            data = client.port.read(self.decoder.wanted)
            if data:
                last = time.monotonic()
                self.ready.extend(self.decoder.feed(data))
        self.silent, self.heard = 0, time.monotonic()
        return self.ready.popleft(), time.monotonic() - start



    def _late(self, frame):
        """A frame of no request in flight: an answer to an attempt given up on (if one after
        a timeout, that wait was too short), or a stale one."""
        self.client.stats["discarded"] += 1
        if self.timed_out.pop(frame.seq, None) == frame.opcode:
            self.plan.late(frame.opcode)

    def _timed_out(self, flight):
        """Everything in flight is lost: send zeros that complete any frame the device holds
        only partly; return the pieces to send again."""
        biggest = max(sent.size for sent in flight)
        self.plan.timeouts += 1
        self.decoder.reset()
        self.ready.clear()
        self.client.flush(biggest)
        again = []
        while flight:   # (silence counts in `silent`, not in the streak of damage)
            sent = flight.popleft()
            self.timed_out[sent.seq] = sent.piece.exchange.opcode
            again += self._failed(sent, "lost", timeout=True)
        return again

    def _failed(self, sent, kind, *, timeout=False):
        """Record a failed attempt of ``sent`` (a timeout: not in the streak of failures, and
        the payload size stays, since the answer may only be slow); return the pieces to send
        again (it, or what it is cut into at the plan's payload size)."""
        piece, root, stats = sent.piece, sent.piece.root, self.client.stats
        if piece.probe:
            return []
        root.damage[kind] += 1
        self.plan.damaged(kind, sent.size, shrink=not timeout)
        stats["retries"] += 1
        stats["corrupt"] += kind == "damaged"
        self.streak += not timeout
        if self.streak >= self.dead_after:
            sizes = ", ".join(map(str, sorted(root.sizes, reverse=True)))
            raise LinkError(f"no intact answer to {root.exchange.what} in {self.streak} "
                            f"attempts in a row (pieces of {sizes} data bytes tried); damage "
                            f"seen: {describe_damage(root.damage)}")
        split = piece.exchange.split
        cut = split(self.plan.limit) if split is not None else None
        if cut is None:
            return [piece]
        exchanges, piece.join = cut
        piece.answers, piece.left = [None] * len(exchanges), len(exchanges)
        return [_Piece(e, piece, i) for i, e in enumerate(exchanges)]


def _deliver(piece, payload):
    """Give ``piece`` its answer; a request's whole answer once all its pieces have theirs."""
    while piece.parent is not None:
        parent = piece.parent
        parent.answers[piece.index] = payload
        parent.left -= 1
        if parent.left:
            return
        payload, piece = parent.join(parent.answers), parent
    piece.result = payload
