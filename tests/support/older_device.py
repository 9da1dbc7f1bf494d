"""A device of protocol version 5 (before LOAD, FETCH and CLASSES) for the host's fallback
tests, and a transport that counts the bytes through it by opcode and direction.

:class:`Version5Device` wraps an :class:`sim.inprocess.InProcessDevice`: it answers INFO with a
version 5 INFO (no ``rx_fifo``, no ``features``: the layout of that version, built here from
the fields by hand, not by the host's reader) and LOAD, FETCH and CLASSES with BAD_OPCODE, as
a version 5 frame engine does; every other request goes to the device inside.
"""

import collections

from host.frames import RequestDecoder, ResponseDecoder
from hwgen.config import DATAFLOWS
from hwgen.memmap import regions
from hwgen.protocol import Opcode, Status, encode_request, encode_response
from sim.inprocess import InProcessDevice

__all__ = ["ByteCounter", "Version5Device", "version5_info"]

#: The INFO header of protocol version 5: (field, bits), from bit 0 on.
_HEADER_5 = (("version", 8), ("config_hash", 64), ("rows", 8), ("cols", 8), ("dataflow", 8),
             ("in_bits", 8), ("w_bits", 8), ("acc_bits", 8), ("mult_bits", 8),
             ("max_payload", 16), ("acc_depth", 32), ("baud", 32), ("n_regions", 8))


def version5_info(config, max_payload):
    """Return the INFO payload a version 5 device built from ``config`` answers."""
    geometry = list(regions(config).values())
    values = {"version": 5, "config_hash": config.hash_int, "rows": config.rows,
              "cols": config.cols, "dataflow": DATAFLOWS.index(config.dataflow),
              "in_bits": config.in_bits, "w_bits": config.w_bits, "acc_bits": config.acc_bits,
              "mult_bits": config.mult_bits, "max_payload": max_payload,
              "acc_depth": config.acc_depth, "baud": 0, "n_regions": len(geometry)}
    word, at = 0, 0
    for name, bits in _HEADER_5:
        word |= values[name] << at
        at += bits
    head = word.to_bytes(at // 8, "little")
    return head + b"".join(g.word_bits.to_bytes(2, "little") + g.depth.to_bytes(4, "little")
                           for g in geometry)


class Version5Device:
    """A version 5 device built from ``config`` (see the module's notes)."""

    synchronous = True

    def __init__(self, config, **options):
        self.inner = InProcessDevice(config, **options)
        self.url = self.inner.url + "?v5"
        self.timeout = None
        self._decoder = RequestDecoder()
        self._out = bytearray()
        self._info = version5_info(config, self.inner.max_payload)

    def write(self, data):
        for frame in self._decoder.feed(bytes(data)):
            if frame.opcode == Opcode.INFO:
                self._out += encode_response(frame.opcode, frame.seq, Status.OK, self._info)
            elif frame.opcode in (Opcode.LOAD, Opcode.FETCH, Opcode.CLASSES):
                self._out += encode_response(frame.opcode, frame.seq, Status.BAD_OPCODE)
            else:
                self.inner.write(encode_request(frame.opcode, frame.seq, frame.payload))
                self._out += self.inner.read(1 << 20)
        return len(data)

    def read(self, size=1):
        out = bytes(self._out[:size])
        del self._out[:size]
        return out


class ByteCounter:
    """A transport around ``port`` that counts the bytes of each request (``sent``) and each
    answer (``received``) by opcode name, decoding both streams."""

    def __init__(self, port):
        self.port = port
        self.url = getattr(port, "url", "counted")
        self.synchronous = getattr(port, "synchronous", False)
        self.sent = collections.Counter()
        self.received = collections.Counter()
        self._requests = RequestDecoder()
        self._answers = ResponseDecoder()

    @property
    def timeout(self):
        return getattr(self.port, "timeout", None)

    @timeout.setter
    def timeout(self, value):
        self.port.timeout = value

    def write(self, data):
        for frame in self._requests.feed(bytes(data)):
            self.sent[_name(frame.opcode)] += len(encode_request(frame.opcode, frame.seq,
                                                                 frame.payload))
        return self.port.write(data)

    def read(self, size=1):
        data = self.port.read(size)
        for frame in self._answers.feed(data):
            self.received[_name(frame.opcode)] += len(encode_response(
                frame.opcode, frame.seq, frame.status, frame.payload))
        return data

    def reset(self):
        """Forget the counts (e.g. after the program's load)."""
        self.sent.clear()
        self.received.clear()

    def close(self):
        close = getattr(self.port, "close", None)
        if callable(close):
            close()


def _name(opcode):
    return opcode.name if isinstance(opcode, Opcode) else str(opcode)
