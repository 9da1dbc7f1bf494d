"""A link that damages bytes: for the tests and the benchmark of a host on a lossy line.

:class:`Damage` is the model: each byte that crosses is, with probability ``rate`` (spread over
bursts of ``burst`` bytes in a row), flipped in one bit, dropped, or followed by an inserted
byte, the kind drawn at random, from a seeded generator, so that a run repeats. Two places use
it, one damage model for each direction:

- :class:`LossyTransport` wraps a transport (:class:`host.transport.Transport`, e.g.
  :class:`sim.inprocess.InProcessDevice`) in this process: the tests;
- :class:`LossyProxy` listens on a TCP port and forwards every connection to a
  ``socket://`` URL (the simulated board), damaging what it forwards both ways: the benchmark
  (``benchmarks/link.py --damage``), with the real socket and the real board between.
"""

import dataclasses
import select
import socket
import threading

import numpy as np

__all__ = ["Damage", "LossyProxy", "LossyTransport"]

# The kinds of damage a byte may take.
_KINDS = ("flip", "drop", "insert")


@dataclasses.dataclass
class Damage:
    """Damage a byte stream (see the module): each byte starts a burst of ``burst`` damaged
    bytes with probability ``rate / burst``, so that about ``rate`` of the bytes are damaged.

    Parameters
    ----------
    rate : float
        Share of the bytes damaged, ``0 <= rate < 1``.
    burst : int
        Bytes in a row each burst damages (1: single bytes).
    seed : int
        Of the generator: the same seed damages the same bytes of the same stream.
    kinds : tuple of str
        The kinds of damage drawn from, with equal odds: ``"flip"``, ``"drop"``, ``"insert"``.

    Attributes
    ----------
    counts : dict
        Bytes ``"flip"`` ped, ``"drop"`` ped and ``"insert"`` ed so far, and ``"bytes"`` seen.
    """

    rate: float
    burst: int = 1
    seed: int = 0
    kinds: tuple = _KINDS
    counts: dict = dataclasses.field(init=False)

    def __post_init__(self):
        if isinstance(self.rate, bool) or not isinstance(self.rate, int | float) \
                or not 0 <= self.rate < 1:
            raise ValueError(f"rate must be a share of the bytes in [0, 1), not {self.rate!r}")
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise ValueError(f"burst must be an int >= 1 (bytes), not {self.burst!r}")
        if not self.kinds or set(self.kinds) - set(_KINDS):
            raise ValueError(f"kinds={self.kinds!r}; allowed: some of {', '.join(_KINDS)}")
        self._rng = np.random.default_rng(self.seed)
        self._left = 0    # bytes of the current burst still to damage
        self.counts = {"bytes": 0, **dict.fromkeys(_KINDS, 0)}

    def apply(self, data):
        """Return ``data`` (bytes) as it arrives after the damage."""
        data = bytes(data)
        self.counts["bytes"] += len(data)
        if not self.rate or not data:
            return data
        starts = self._rng.random(len(data)) < self.rate / self.burst
        if not self._left and not starts.any():
            return data
        out = bytearray()
        for i, byte in enumerate(data):
            if starts[i]:
                self._left = max(self._left, self.burst)
            if not self._left:
                out.append(byte)
                continue
            self._left -= 1
            kind = self.kinds[self._rng.integers(len(self.kinds))]
            self.counts[kind] += 1
            if kind == "flip":
                out.append(byte ^ (1 << int(self._rng.integers(8))))
            elif kind == "insert":
                out += bytes([byte, int(self._rng.integers(256))])
        return bytes(out)


class LossyTransport:
    """A transport whose bytes are damaged on their way: what is written to the device by
    ``to_device``, what is read from it by ``to_host`` (:class:`Damage` s, either None for a
    clean direction). Its ``timeout``, ``synchronous`` and ``url`` are the wrapped one's."""

    def __init__(self, transport, to_device=None, to_host=None):
        self.transport = transport
        self.to_device = to_device
        self.to_host = to_host

    @property
    def timeout(self):
        return getattr(self.transport, "timeout", None)

    @timeout.setter
    def timeout(self, value):
        if hasattr(self.transport, "timeout"):
            self.transport.timeout = value

    @property
    def synchronous(self):
        return bool(getattr(self.transport, "synchronous", False))

    @property
    def url(self):
        return getattr(self.transport, "url", None)

    def write(self, data):
        damaged = data if self.to_device is None else self.to_device.apply(data)
        self.transport.write(damaged)
        return len(data)

    def read(self, size=1):
        data = self.transport.read(size)
        return data if self.to_host is None else self.to_host.apply(data)

    def close(self):
        close = getattr(self.transport, "close", None)
        if callable(close):
            close()


class LossyProxy:
    """Forward connections on a TCP port of 127.0.0.1 to ``target`` (a ``socket://HOST:PORT``
    URL), damaging the bytes: towards the target by ``to_device``, back by ``to_host``.

    A context manager; :attr:`url` is where to connect. One connection at a time, forwarded
    as it arrives (each chunk read is damaged and sent on at once).
    """

    def __init__(self, target, to_device=None, to_host=None):
        host, _, port = target.removeprefix("socket://").rpartition(":")
        self._target = (host, int(port))
        self.to_device = to_device
        self.to_host = to_host
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.url = f"socket://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="lossy-proxy")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stopped.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _serve(self):
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with client, socket.create_connection(self._target) as server:
                for sock in (client, server):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._pump(client, server)

    def _pump(self, client, server):
        ways = {client: (server, self.to_device), server: (client, self.to_host)}
        while not self._stopped.is_set():
            readable, _, _ = select.select(list(ways), [], [], 0.05)
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                other, damage = ways[sock]
                other.sendall(data if damage is None else damage.apply(data))
