"""How big a request's frame may be, and how long its answer may take, as the link behaves.

A frame of ``s`` bytes crosses a link that damages a byte with probability ``r`` intact with
probability ``(1 - r) ** s``: on a clean link the host sends frames of the device's whole
``max_payload``, on a damaged one that costs a resend of the whole frame far too often (at
0.2 % of the bytes damaged a LOAD of 1,000 bytes is intact one time in seven).
:class:`FramePlan` is the one place that decides, for every request a host sends on one link
(the :class:`~host.client.DeviceClient`'s, so :class:`host.Accelerator`, the pools of them and
the training's devices alike): the payload size requests are cut to (:attr:`FramePlan.limit`),
halved after each damaged or lost answer and doubled back after :data:`GROW_AFTER` intact ones
in a row, within the device's ``max_payload``; and how long to wait for an answer before it
counts as lost (:meth:`FramePlan.attempt_timeout`): a few times the waits seen so far, not the
client's whole ``timeout``, so that a lost frame costs little. It also tallies the damage seen,
for the benchmarks and the error messages.
"""

import collections

from hwgen.protocol import MAX_PAYLOAD

__all__ = ["DAMAGE", "GROW_AFTER", "FramePlan", "describe_damage"]

#: Intact answers in a row after which the payload size doubles (up to the device's maximum).
GROW_AFTER = 2
#: The kinds of damage tallied: a request the device received damaged (BAD_CRC), an answer
#: that arrived damaged, a request or answer lost on the way (no answer, or a later one first),
#: a refusal on a damaging link (a damaged request whose CRC happened to match: sent once more).
DAMAGE = ("bad_crc", "damaged", "lost", "refused")
# A wait counts as lost after this many times the usual wait, and never before this floor (s).
# (An answer that comes later only costs a frame sent again.)
_WAIT_FACTOR = 3
_WAIT_FLOOR_S = 0.025
# The least pause (s) after which an answer that has begun counts as cut short.
_STALL_S = 0.005
# How much of the wait estimate an answer's shorter wait takes off.
_WAIT_DECAY = 0.2
# Intact answers after the last damage for which a link still counts as damaging.
_LATELY = 256
# Smallest payload the plan cuts to: the pieces' own minimum (one word, one sample) still wins.
_LEAST_LIMIT = 16


class FramePlan:
    """The payload size and answer wait of one link's requests (see the module).

    Parameters
    ----------
    timeout : float
        The client's timeout: the longest wait for an answer, and the first (nothing is known
        of the link yet).
    max_payload : int
        The device's payload buffer; :meth:`device` sets it once INFO has told.

    Attributes
    ----------
    limit : int
        Payload bytes a request is cut to now.
    most : int
        The device's ``max_payload``.
    damage : collections.Counter
        Failed attempts by kind (:data:`DAMAGE`).
    resent_bytes : int
        Bytes of frames sent again after a failure.
    timeouts : int
        Waits that ended with nothing in flight answered (each cost an attempt timeout).
    """

    def __init__(self, timeout, max_payload=MAX_PAYLOAD):
        self.timeout = timeout
        self.most = max_payload
        self.limit = max_payload
        self.damage = collections.Counter()
        self.resent_bytes = 0
        self.timeouts = 0
        self._clean = 0
        self._since_damage = _LATELY    # intact answers since the last damage
        self._wait = {}                 # estimate of an answer's wait (s), by opcode
        self._seconds_per_byte = 0.0    # the line's time per byte (a UART's 10 bits)

    def device(self, max_payload, baud=0):
        """Take the device's ``max_payload`` and line rate (``baud``; 0: a byte-stream link)."""
        self.most = max_payload
        self.limit = min(self.limit, max_payload) if self.damage else max_payload
        self._seconds_per_byte = 10.0 / baud if baud else 0.0

    def damaged(self, kind, resend_bytes=0, *, shrink=True):
        """Record a failed attempt of ``kind`` (one of :data:`DAMAGE`) whose frame of
        ``resend_bytes`` goes again: halve the payload size (not with ``shrink=False``: a
        timeout, which may have been a slow answer rather than a damaged frame)."""
        if kind not in DAMAGE:
            raise ValueError(f"kind={kind!r}; allowed: {', '.join(DAMAGE)}")
        self.damage[kind] += 1
        self.resent_bytes += resend_bytes
        self._since_damage = 0
        if shrink:
            self._clean = 0
            self.limit = max(_LEAST_LIMIT, self.limit // 2)

    def late(self, opcode):
        """Record an answer to an ``opcode`` request that came after it was given up on: its
        usual wait doubles (the answer was slow, not lost)."""
        wait = self._wait.get(opcode, _WAIT_FLOOR_S / _WAIT_FACTOR)
        self._wait[opcode] = 2 * max(wait, _WAIT_FLOOR_S / _WAIT_FACTOR)

    def intact(self, opcode, waited):
        """Record an intact answer to an ``opcode`` request after ``waited`` seconds: the
        opcode's wait estimate follows (the longest wait lately: it jumps up at once and decays
        by :data:`_WAIT_DECAY` an answer, since answers in a pipeline come with next to no
        wait; by opcode, since a RUN may be answered only once the program has run), and after
        :data:`GROW_AFTER` in a row the payload size doubles."""
        last = self._wait.get(opcode)
        self._wait[opcode] = waited if last is None else max(waited, (1 - _WAIT_DECAY) * last)
        self._since_damage += 1
        self._clean += 1
        if self._clean >= GROW_AFTER:
            self._clean = 0
            self.limit = min(self.most, 2 * self.limit)

    @property
    def damaging(self):
        """Whether the link has damaged a frame lately: within the last :data:`_LATELY`
        intact answers."""
        return self._since_damage < _LATELY

    def stall_timeout(self):
        """Return how long an answer that has begun may pause before it counts as cut short
        (its bytes come back to back): a fraction of the usual wait, at least a few
        milliseconds and ten byte times of the line."""
        return max(_STALL_S, 10 * self._seconds_per_byte,
                   max(self._wait.values(), default=0) / 2)

    def attempt_timeout(self, opcodes, pending_bytes=0, silent=0, *, guess=True):
        """Return how long to wait for an answer to requests of ``opcodes`` before they count
        as lost: a few times their usual wait plus the line time of the ``pending_bytes`` still
        to cross it, at least :data:`_WAIT_FLOOR_S`, doubled for each of the ``silent`` waits
        in a row that heard nothing, and never longer than :attr:`timeout` (which is also the
        first wait; an opcode not answered yet takes the longest usual wait of the others, but
        without ``guess``: RUN, answered after the program on an in-process device)."""
        known = max(self._wait.values(), default=None) if guess else None
        waits = [self._wait.get(opcode, known) for opcode in opcodes]
        if not waits or None in waits:
            return self.timeout
        wait = max(_WAIT_FLOOR_S, _WAIT_FACTOR * max(waits)) \
            + pending_bytes * self._seconds_per_byte
        return min(self.timeout, wait * 2 ** silent)



def describe_damage(damage):
    """Return the tally ``damage`` (failed attempts by kind, :data:`DAMAGE`) as text, e.g.
    ``"3 BAD_CRC, 1 damaged answer, 2 lost"``."""
    names = {"bad_crc": "BAD_CRC", "damaged": "damaged answer", "lost": "lost",
             "refused": "refused"}
    parts = [f"{damage[k]} {names[k]}{'s' if k == 'damaged' and damage[k] > 1 else ''}"
             for k in DAMAGE if damage[k]]
    return ", ".join(parts) or "none"
