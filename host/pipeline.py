"""Requests in flight: the host sends the next requests before the answer to the last one is
read, never more bytes ahead of the request being answered than the device's receive FIFO
holds.

The UART is full duplex: while a device streams one answer out (a FETCH's values, CLASSES'
indices), the bytes of the next requests (the next chunk's LOADs) can stream in, and wait in its
receive FIFO (INFO's ``rx_fifo``) until the frame engine takes them. :func:`pipeline` sends a
list of idempotent requests that way and returns their answers in order. A request whose
answer is lost or damaged is sent again on its own (:meth:`DeviceClient.request
<host.client.DeviceClient.request>`, with its retries), and so is every request after it that
was in flight; answers to the attempts given up on are skipped by their sequence numbers.
"""

import collections
import time

from hwgen.protocol import FRAME_OVERHEAD, Status, encode_request

from .client import DeviceError
from .frames import ResponseDecoder

__all__ = ["pipeline"]


def pipeline(client, exchanges, window):
    """Send ``exchanges`` (each with ``opcode``, ``payload`` and ``what``: idempotent requests)
    through ``client`` and return the payload of each answer, in order.

    At most ``window`` bytes of requests are sent beyond the oldest request not yet answered
    (the device's receive FIFO); with ``window`` 0 each request waits for the last answer.

    Raises
    ------
    DeviceError
        For an answer with an error status (naming the request's ``what``).
    LinkError, LinkTimeout
        As :meth:`DeviceClient.request <host.client.DeviceClient.request>`, once a request
        sent again on its own gets no intact answer.
    """
    answers = [None] * len(exchanges)
    flight = collections.deque()   # (index, seq, frame bytes) sent, answer not yet read
    decoder = ResponseDecoder()
    ready = collections.deque()    # frames decoded, not yet looked at
    following = 0                  # bytes in flight behind the oldest request
    i = 0
    while i < len(exchanges) or flight:
        while i < len(exchanges):
            size = FRAME_OVERHEAD + len(exchanges[i].payload)
            if flight and following + size > window:
                break
            seq = client.next_seq()
            client.port.write(encode_request(exchanges[i].opcode, seq, exchanges[i].payload))
            if flight:
                following += size
            flight.append((i, seq, size))
            i += 1
        index, seq, _ = flight[0]
        frame = _answer(client, decoder, ready, exchanges[index].opcode, seq)
        if frame is None or not frame.crc_ok or frame.status == Status.BAD_CRC:
            # Lost or damaged: what is in flight goes again, one request at a time.
            client.stats["retries"] += 1
            client.stats["corrupt"] += frame is not None and not frame.crc_ok
            for index, _, _ in flight:
                answers[index] = client.request(exchanges[index].opcode,
                                                exchanges[index].payload, exchanges[index].what)
            flight.clear()
            following = 0
            decoder.reset()
            ready.clear()
            continue
        if frame.status != Status.OK:
            raise DeviceError(exchanges[index].what, frame.status)
        answers[index] = frame.payload
        flight.popleft()
        following -= flight[0][2] if flight else 0
    return answers


def _answer(client, decoder, ready, opcode, seq):
    """Return the answer frame to request ``seq``, or None after ``client.timeout`` seconds
    of waiting; frames of other requests are skipped (counted as discarded). ``ready`` holds
    frames decoded but not yet looked at (answers to later requests), in order."""
    deadline = time.monotonic() + client.timeout
    while True:
        while ready:
            frame = ready.popleft()
            if frame.seq == seq and frame.opcode == opcode:
                return frame
            client.stats["discarded"] += 1
        if time.monotonic() >= deadline:
            return None
        ready.extend(decoder.feed(client.port.read(decoder.wanted)))
