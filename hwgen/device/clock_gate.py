"""A clock that stops while the logic it drives is idle: cycles a Verilator model skips.

Verilator evaluates everything that a clock edge may change at every edge of that clock, so
an accelerator that is idle between requests costs as much per cycle as one that computes.
:func:`gate_clock` gives a part of a design a clock domain of its own whose edges are
``sync``'s, passed only in the cycles that follow a cycle of activity (or one of the
``linger`` cycles after it): Verilator then evaluates that part only on those edges. For the
gated part this is a clock enable (its registers take their next values exactly when they
would with ``EnableInserter``), so it changes nothing as long as the part's registers hold
still anyway whenever the enable is low; the simulated board (:mod:`sim.board`), the only
user, has a test that runs a gated and an ungated device side by side.

It is a simulation device: an FPGA design enables its flip-flops instead of gating a clock.
"""

from amaranth.hdl import ClockDomain, ClockSignal, DomainRenamer, Module, Mux, ResetSignal, Signal

__all__ = ["RUN_LINGER", "gate_clock", "run_clock"]

#: Cycles the blocks of a run need after ``busy`` falls to come to rest (the array's enable
#: follows ``busy`` a cycle late), with a margin.
RUN_LINGER = 8


def gate_clock(m: Module, domain, *, active, linger):
    """Add to ``m`` the local clock domain ``domain``, ``sync``'s clock gated by ``active``.

    The domain's clock has a rising edge at ``sync``'s rising edge after every cycle in which
    ``active`` was high or was high at most ``linger`` cycles before, and at no other time; its
    reset is ``sync``'s, which counts as activity. The enable is taken at ``sync``'s falling
    edge (a register of a domain of that edge), so the gated clock has no glitch in a
    zero-delay simulation.

    Parameters
    ----------
    m : Module
    domain : str
        Name of the new domain (the gated logic is renamed into it with ``DomainRenamer``).
    active : Value
        One bit, in ``sync``: the gated logic has work this cycle. Like any synchronous
        signal it may change only after ``sync``'s rising edge: it is sampled at the falling
        edge.
    linger : int
        Cycles the clock keeps running after ``active`` falls (the gated logic's latency
        to its rest state), at least 0.

    Returns
    -------
    Signal
        The enable: high while the domain's clock passes ``sync``'s edges (it changes on
        falling edges).

    Raises
    ------
    ValueError
        If ``linger`` is not an int of at least 0.
    """
    if isinstance(linger, bool) or not isinstance(linger, int) or linger < 0:
        raise ValueError(f"linger must be an int >= 0 (cycles), not {linger!r}")
    enable_domain = f"{domain}_enable"
    gated = ClockDomain(domain, local=True)
    m.domains += [gated, ClockDomain(enable_domain, clk_edge="neg", local=True,
                                     reset_less=True)]
    busy = active | ResetSignal("sync")
    left = Signal(range(linger + 1), init=linger, name=f"{domain}_linger")
    m.d.sync += left.eq(Mux(busy, linger, Mux(left == 0, 0, left - 1)))
    enable = Signal(init=1, name=f"{domain}_enable")
    m.d[enable_domain] += enable.eq(busy | (left != 0))
    m.d.comb += [ClockSignal(enable_domain).eq(ClockSignal("sync")),
                 gated.clk.eq(ClockSignal("sync") & enable),
                 gated.rst.eq(ResetSignal("sync"))]
    return enable


def run_clock(m, busy):
    """Add to ``m`` the domain ``run``, ``sync``'s clock while ``busy`` (a program runs) and
    :data:`RUN_LINGER` cycles after; return a function that puts an elaboratable in it."""
    gate_clock(m, "run", active=busy, linger=RUN_LINGER)
    return DomainRenamer("run")
