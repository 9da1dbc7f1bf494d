"""Stream sources for Amaranth simulator testbenches that wait given idle cycles between their
items, so that a unit's ``ready`` rules meet every spacing of its producers."""

__all__ = ["GappedSources"]


class GappedSources:
    """Drive ``(port, items, gaps, done)`` streams: item ``i`` waits ``gaps[i]`` idle cycles
    (none past the list's end), then until ``ready``; each transfer's cycle goes into ``done``.

    Call :meth:`offer` once a cycle after setting the unit's other inputs, :meth:`advance`
    after reading its outputs, before the tick.
    """

    def __init__(self, streams):
        self.streams = [(port, items, list(gaps), done) for port, items, gaps, done in streams]
        self.idle = [gaps[0] if gaps else 0 for _, _, gaps, _ in self.streams]
        self.offered = []

    def offer(self, ctx, filler=None):
        """Offer each stream's next item where it waits no more; return which were offered.
        ``filler(port)`` gives the payload of a stream not offered (default 0)."""
        self.offered = []
        for s, (port, items, _, done) in enumerate(self.streams):
            valid = self.idle[s] == 0 and len(done) < len(items)
            ctx.set(port.valid, valid)
            idle_payload = 0 if filler is None else filler(port)
            ctx.set(port.payload.as_value(), items[len(done)] if valid else idle_payload)
            self.offered.append(valid)
        return self.offered

    def advance(self, ctx, cycle):
        """Count this cycle's transfers and the waiting streams' idle cycles."""
        for s, (port, _, gaps, done) in enumerate(self.streams):
            if self.offered[s] and ctx.get(port.ready):
                done.append(cycle)
                self.idle[s] = gaps[len(done)] if len(done) < len(gaps) else 0
            elif not self.offered[s] and self.idle[s]:
                self.idle[s] -= 1
