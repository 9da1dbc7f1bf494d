"""The device: accelerator + frame engine, behind a UART or a plain byte stream.

``Device(config, link=Link.UART)`` is what a board runs; ``Link.STREAM`` exposes the byte
streams directly, which is what the simulated board drives (no bit-level UART to simulate per
byte).
"""

import enum

from amaranth.hdl import DomainRenamer, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..implementation import Implementation, Registers
from ..link.bridge import HostPortBridge
from ..link.frame import FrameEngine
from ..link.uart import UART, divisor_for
from ..protocol import DEFAULT_BAUD, RX_FIFO, frame_timeout_cycles
from .clock_gate import RUN_LINGER, gate_clock
from .cores import accelerator_core
from .host_access import relay_host

__all__ = ["LINKS", "Device", "Link"]


class Link(enum.StrEnum):
    """How a host's bytes reach the device."""

    #: 8N1 serial pins.
    UART = "uart"
    #: Request and response byte streams (the simulated board).
    STREAM = "stream"


LINKS = tuple(link.value for link in Link)
#: Bytes the UART may deliver while the frame engine is busy answering (the default; INFO
#: reports a device's own as ``rx_fifo``).
RX_FIFO_DEPTH = RX_FIFO
# Cycles a gated clock runs on after its logic's last activity (``gate_idle``): longer than
# any latency from a host access to rest (a registered read's answer). After a run the core
# runs on for RUN_LINGER cycles, as the run's blocks do.
_LINGER = 2


class Device(wiring.Component):
    """An accelerator that a host drives with :mod:`hwgen.protocol` frames.

    Parameters
    ----------
    config : AcceleratorConfig
        Its ``dtype`` chooses the accelerator (:func:`~hwgen.device.cores.accelerator_core`):
        the int8 core, or the bf16 core (every layer kind of the int8 core).
    link : Link or str
        :attr:`Link.UART`: 8N1 serial pins at ``baud`` (divisor from ``config.clock_hz``);
        :attr:`Link.STREAM`: request and response byte streams.
    baud : int
        Serial rate for ``link="uart"``.
    pe_instances : bool
        Instantiate the processing elements by Verilog module name (for emission).
    implementation : Implementation
        How the accelerator is built (:class:`hwgen.implementation.Implementation`); its
        ``spram`` puts the frame engine's payload buffer into an SB_SPRAM256KA too (unless
        ``act_spram_depth`` takes the SPRAMs left: then it is two block RAMs), its
        ``packed_wire`` and ``class_output`` choose the frame engine's optional commands.
    link_clock_hz : int or None
        Run the link (UART or streams) and the frame engine in a clock domain of their own,
        ``link``, at this frequency, and the accelerator in ``sync`` at ``config.clock_hz``;
        a :class:`hwgen.link.bridge.HostPortBridge` joins them. ``None``: everything in ``sync``.
    rx_fifo : int or None
        Bytes of the UART's receive FIFO, at least 2 (reported by INFO; a host never sends
        more ahead of an answer it has not read); None: the implementation's ``rx_fifo``. A
        device with ``link="stream"`` reports it too, so that its host paces itself as a
        board's.
    gate_idle : bool
        For a simulator that evaluates a clock domain only on its edges (the simulated board's
        Verilator): clock the accelerator from a clock that stops while it neither runs nor is
        accessed (:func:`hwgen.device.clock_gate.gate_clock`), and, with ``link="stream"``,
        the frame engine from one that stops while no request is under way; the device then
        has a ``rest`` output. The behaviour is the same, cycle for cycle. Not with
        ``link_clock_hz``; not for an FPGA, whose flip-flops take enables instead.

    Members
    -------
    rx : In(1)
        Serial input (``link="uart"``).
    tx : Out(1)
        Serial output (``link="uart"``).
    i_stream : In(stream.Signature(8))
        Request bytes (``link="stream"``).
    o_stream : Out(stream.Signature(8))
        Response bytes (``link="stream"``).
    busy : Out(1)
        A program is running (for an LED).
    rest : Out(1)
        (``gate_idle`` with ``link="stream"``.) Both gated clocks are stopped: until a request
        byte arrives nothing in the device changes, so a simulator need not clock it.
    """

    def __init__(self, config, *, link=Link.UART, baud=DEFAULT_BAUD, implementation=None,
                 pe_instances=False, link_clock_hz=None, rx_fifo=None, gate_idle=False):
        if link not in LINKS:
            raise ValueError(f"link={link!r} is not supported; allowed: {', '.join(LINKS)}")
        link = Link(link)
        implementation = Implementation() if implementation is None else implementation
        if link_clock_hz is not None and (isinstance(link_clock_hz, bool)
                                          or not isinstance(link_clock_hz, int)
                                          or link_clock_hz < 1):
            raise ValueError(f"link_clock_hz must be a positive int or None, not "
                             f"{link_clock_hz!r}")
        implementation = Implementation() if implementation is None else implementation
        rx_fifo = implementation.rx_fifo if rx_fifo is None else rx_fifo
        if isinstance(rx_fifo, bool) or not isinstance(rx_fifo, int) or rx_fifo < 2:
            raise ValueError(f"rx_fifo must be an int >= 2 (bytes), not {rx_fifo!r}")
        if gate_idle and link_clock_hz is not None:
            raise ValueError("gate_idle=True needs the link and the accelerator on one clock "
                             f"(link_clock_hz=None), not link_clock_hz={link_clock_hz!r}")
        self.rx_fifo = rx_fifo
        self.gate_idle = bool(gate_idle)
        self.config = config
        self.link = link
        self.baud = baud
        self.link_clock_hz = link_clock_hz
        link_hz = config.clock_hz if link_clock_hz is None else link_clock_hz
        self.divisor = divisor_for(link_hz, baud) if link is Link.UART else None
        self.accelerator = accelerator_core(config, implementation, pe_instances=pe_instances,
                                            gate_idle=self.gate_idle)
        self.implementation = implementation
        if link is Link.UART:
            members = {"rx": In(1, init=1), "tx": Out(1, init=1)}
        else:
            members = {"i_stream": In(stream.Signature(8)), "o_stream": Out(stream.Signature(8))}
            if self.gate_idle:
                members["rest"] = Out(1)
        super().__init__({**members, "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        acc = self.accelerator
        split = self.link_clock_hz is not None
        if self.gate_idle:
            m.submodules.accelerator = self._gated_accelerator(m)
        else:
            m.submodules.accelerator = acc

        def in_link_domain(elaboratable):
            return DomainRenamer("link")(elaboratable) if split else elaboratable

        # Its timeout counts the link's cycles (100 ms by default).
        timeout = frame_timeout_cycles(self.link_clock_hz) if split else None
        frame = FrameEngine(self.config, spram=self.implementation.spram
                            and not self.config.act_spram_depth, handshake=split,
                            timeout_cycles=timeout,
                            baud=self.baud if self.link is Link.UART else 0,
                            rx_fifo=self.rx_fifo, features=self.implementation.features,
                            # byte streams may take a byte a cycle; a UART is far slower
                            prefetch=self.link is Link.STREAM, wide=self.link is Link.STREAM)
        if self.gate_idle and self.link is Link.STREAM:
            # The engine's state holds still while it hunts for a request with no byte coming.
            enable = gate_clock(m, "frame", active=self.i_stream.valid | ~frame.idle,
                                linger=_LINGER)
            m.submodules.frame = DomainRenamer("frame")(frame)
            m.d.comb += self.rest.eq(~enable & ~self._core_enable)
        else:
            m.submodules.frame = in_link_domain(frame)
        if split:
            m.submodules.bridge = bridge = HostPortBridge(self.config)
            wiring.connect(m, frame.host, bridge.link)
            wiring.connect(m, bridge.core, acc.host)
        elif self.implementation.registers >= Registers.ARRAY:
            relay_host(m, frame.host, acc.host)
        else:
            wiring.connect(m, frame.host, acc.host)
        m.d.comb += self.busy.eq(acc.host.busy)
        if self.link is Link.STREAM:
            wiring.connect(m, wiring.flipped(self.i_stream), frame.i_stream)
            wiring.connect(m, frame.o_stream, wiring.flipped(self.o_stream))
            return m
        uart = UART(self.divisor)
        fifo = SyncFIFOBuffered(width=8, depth=self.rx_fifo)
        m.submodules.uart = in_link_domain(uart)
        m.submodules.rx_fifo = in_link_domain(fifo)
        m.d.comb += [uart.rx.eq(self.rx), self.tx.eq(uart.tx)]
        wiring.connect(m, uart.o_data, fifo.w_stream)
        wiring.connect(m, fifo.r_stream, frame.i_stream)
        wiring.connect(m, frame.o_stream, uart.i_data)
        return m

    def _gated_accelerator(self, m):
        """Return the accelerator in domain ``core``, clocked while it runs or the host port
        uses it (and :data:`_LINGER` cycles after)."""
        host = self.accelerator.host
        ran = Signal(range(RUN_LINGER + 1))   # a run ended at most this many cycles ago
        m.d.sync += ran.eq(Mux(host.busy, RUN_LINGER, Mux(ran == 0, 0, ran - 1)))
        used = host.busy | (ran != 0) | host.we | host.re | host.start | host.clear
        self._core_enable = gate_clock(m, "core", active=used, linger=_LINGER)
        return DomainRenamer("core")(self.accelerator)
