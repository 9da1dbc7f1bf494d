"""The host port across two clock domains: the link's and the accelerator's.

A board may run the serial link and the frame engine from its oscillator and the accelerator
from a faster PLL clock (:class:`hwgen.device.Device` with ``link_clock_hz``): the frame
engine's byte-serial logic then no longer limits the accelerator's clock.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from ..memmap import HostPortSignature, macs_from_busy_cycles

__all__ = ["HostPortBridge"]


class HostPortBridge(wiring.Component):
    """Carry :class:`~hwgen.memmap.HostPortSignature` from the link's domain to the
    accelerator's, one request at a time.

    The link side takes a request (``we``, ``re``, ``start``, ``clear`` or ``snapshot``) when
    none is pending, and pulses ``rvalid`` when the accelerator has carried it out. Until then
    the requester holds ``region``, ``addr``, ``wdata`` and ``batch`` still, as
    :class:`hwgen.link.frame.FrameEngine` does with ``handshake=True``: the accelerator's side reads
    them directly, two synchronizer stages and one register after the request toggled, so that
    they have settled (a toggle handshake; only the toggles and ``busy`` pass through
    synchronizers). ``rdata`` and the counters are registered on the accelerator's side and
    still until the next request.

    ``macs`` is derived from ``busy_cycles`` (the port defines it as rows entered times
    ``rows * cols``) rather than carried: 64 registers fewer.

    Parameters
    ----------
    config : AcceleratorConfig
    link_domain, core_domain : str
        The requester's and the accelerator's clock domains.

    Members
    -------
    link : Out(HostPortSignature(config))
        Towards the requester (the frame engine), in ``link_domain``.
    core : In(HostPortSignature(config))
        Towards the accelerator, in ``core_domain``.
    """

    def __init__(self, config, *, link_domain="link", core_domain="sync"):
        self.config = config
        self.link_domain = link_domain
        self.core_domain = core_domain
        super().__init__({"link": Out(HostPortSignature(config)),
                          "core": In(HostPortSignature(config))})

    def elaborate(self, platform):
        m = Module()
        link, core = self.link, self.core
        ld, cd = m.d[self.link_domain], m.d[self.core_domain]

        # -- link side: one request at a time -----------------------------------------------------
        req = Signal()          # toggles once per request
        done_toggle = Signal()  # the core side's copy of `req` once the request is carried out
        done_seen = Signal()
        pending = Signal()
        kind = Signal(5)        # we, re, start, clear, snapshot
        asked = Cat(link.we, link.re, link.start, link.clear, link.snapshot)
        m.submodules.done_sync = FFSynchronizer(done_toggle, done_seen,
                                                o_domain=self.link_domain)
        m.submodules.busy_sync = FFSynchronizer(core.busy, link.busy, o_domain=self.link_domain)
        done = pending & (done_seen == req)
        m.d.comb += link.rvalid.eq(done)
        with m.If(done):
            ld += pending.eq(0)
        with m.Elif(~pending & asked.any()):
            ld += [kind.eq(asked), req.eq(~req), pending.eq(1)]

        # -- core side: carry it out once the toggle arrives --------------------------------------
        req_seen = Signal()
        m.submodules.req_sync = FFSynchronizer(req, req_seen, o_domain=self.core_domain)
        rdata = Signal.like(core.rdata, name="rdata_q")
        cycles = Signal.like(core.cycles, name="cycles_q")
        busy_cycles = Signal.like(core.busy_cycles, name="busy_cycles_q")
        m.d.comb += [
            core.region.eq(link.region), core.addr.eq(link.addr), core.wdata.eq(link.wdata),
            core.batch.eq(link.batch),
            link.rdata.eq(rdata), link.cycles.eq(cycles), link.busy_cycles.eq(busy_cycles),
            link.macs.eq(macs_from_busy_cycles(busy_cycles, self.config)),
        ]
        # The strobes come from registers, set the cycle after the toggle arrives: the
        # accelerator's write enables then start from a flip-flop, not from the handshake's
        # comparison (on the iCE40 that chain, routed across the chip, was the longest path).
        issued = Signal()       # the waiting request's strobes are out, or were
        strobes = Signal(4)     # we, re, start, clear: one cycle each
        m.d.comb += [core.we.eq(strobes[0]), core.re.eq(strobes[1]), core.start.eq(strobes[2]),
                     core.clear.eq(strobes[3])]
        cd += strobes.eq(0)
        with m.If((req_seen != done_toggle) & ~issued):
            cd += [strobes.eq(kind[:4]), issued.eq(1)]
            with m.If(kind[4]):
                cd += [cycles.eq(core.cycles), busy_cycles.eq(core.busy_cycles)]
        with m.Elif(issued & (~kind[1] | core.rvalid)):
            # Done: in the strobe's cycle for a write, start, clear or snapshot; with rvalid for
            # a read (in the strobe's cycle too, for a port without latency).
            cd += [done_toggle.eq(req_seen), issued.eq(0)]
            with m.If(kind[1]):
                cd += rdata.eq(core.rdata)
        return m
