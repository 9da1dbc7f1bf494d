"""A Python model of the controller's outputs, driving a block's control inputs in the Amaranth
simulator as the controller would."""

from hwgen.memmap import geometry_layout

from .blocks import garble, plain_geometry, random_bits


class ControllerOutputs:
    """Drive a block's inputs from the controller as
    :class:`hwgen.device.controller.Controller` drives them, cycle by cycle, with random bits
    wherever it promises nothing.

    A layer starts with a one-cycle ``start_layer`` (LOAD): from that cycle on ``desc`` and
    ``geom`` hold the layer's descriptor and geometry (a plain layer's: 1x1 images, see
    :func:`plain_geometry`, with random bits in the steps such a walk never takes), and from the
    next cycle on ``k_end``/``n_end`` hold ``k_tiles - 1``/``n_tiles - 1`` (the registered
    bounds' first cycle); a spatial layer's ``desc`` and ``geom`` hold from
    :func:`~hwgen.device.controller.geometry_lead` cycles before it (GEOM's last cycles: the
    test bench drives them with the layer's descriptor and no pulse). ``prime`` follows
    ``start_layer`` and each later chunk's ``start_chunk`` (NEXT) by one cycle; the test bench
    says when, and it stays high for :attr:`PRIME_CYCLES` cycles (PRIME and PRIME2): the cycle
    after a ``"prime"`` pulse drives it again by itself and takes no pulse. From
    :meth:`end_layer` (the next layer's FETCH; its DECODE and GEOM change ``desc`` and ``geom``)
    to the next ``start_layer`` those four are random bits. A run's ``last_row`` (``batch - 1``,
    wrapped to its width) is valid from its first ``start_layer`` to :meth:`end_run`. The matrix
    units' ``begin_chunk`` (the accelerator's register) is high with either start.

    Only the ports ``block`` has are driven; ``ports`` maps a block's port to the controller's
    output that drives it under another name (the weight feeder's ``start`` is ``prime``).
    """

    OUTPUTS = ("start_layer", "start_chunk", "begin_chunk", "prime", "desc", "geom", "last_row",
               "k_end", "n_end")
    PULSES = ("start_layer", "start_chunk", "prime")
    #: Cycles ``prime`` is high for each chunk: the controller's PRIME and PRIME2 states.
    PRIME_CYCLES = 2

    def __init__(self, block, rng, *, ports=None):
        self.block = block
        self.rng = rng
        members = block.signature.members
        self.wires = {name: [name] if name in members else [] for name in self.OUTPUTS}
        for port, output in (ports or {}).items():
            if output not in self.OUTPUTS or port not in members:
                raise ValueError(f"ports: {port!r} -> {output!r}; allowed: a port of the block "
                                 f"-> one of {self.OUTPUTS}")
            self.wires[output].append(port)
        self.desc = self.geom = None
        self.bounds = False
        self.batch = None
        self.priming = 0        # the cycles of `prime` still to come after this one

    def _set(self, ctx, name, value):
        from amaranth.hdl import Value

        for port_name in self.wires[name]:
            port = getattr(self.block, port_name)
            if value is None:
                garble(ctx, self.rng, port)
            elif isinstance(value, dict):
                ctx.set(port, value)
            else:
                ctx.set(port, value & ((1 << len(Value.cast(port))) - 1))

    def _geometry(self, desc, geom):
        if geom is not None:
            return dict(geom)
        members = geometry_layout(self.block.config).members
        steps = {name: random_bits(self.rng, members[name].width)
                 for name in ("col_step", "row_step", "ky_step")}
        return {**plain_geometry(desc), **steps}

    def drive(self, ctx, pulse=None, *, desc=None, geom=None, batch=None):
        """Set this cycle's ports. ``pulse``: None, ``"start_layer"`` (with the layer's
        ``desc`` (:func:`descriptor`) and a spatial layer's ``geom``; ``batch``: the rows of
        a new run, the last run's otherwise), ``"start_chunk"`` or ``"prime"`` (the first of
        its cycles); None in the later cycles of ``prime``, and in a spatial layer's cycles
        before its ``start_layer`` in which ``desc`` and ``geom`` already hold (given here
        and again with ``start_layer``).

        Returns
        -------
        int
            Which cycle of ``prime`` this is (1 .. :attr:`PRIME_CYCLES`), 0 outside it.
        """
        if pulse is not None and pulse not in self.PULSES:
            raise ValueError(f"pulse={pulse!r}; allowed: None, {', '.join(self.PULSES)}")
        if pulse is not None and self.priming:
            raise ValueError(f"pulse={pulse!r} in cycle {self.PRIME_CYCLES - self.priming + 1}"
                             f" of prime; allowed: None until its {self.PRIME_CYCLES} cycles end")
        if pulse == "start_layer" and desc is None:
            raise ValueError("a descriptor comes with start_layer")
        if desc is not None and pulse not in ("start_layer", None):
            raise ValueError(f"a descriptor with pulse={pulse!r}; allowed: with start_layer, "
                             "or with no pulse (ahead of a spatial layer's start_layer)")
        if pulse is None and desc is not None and geom is None:
            raise ValueError("a descriptor ahead of start_layer needs the layer's geometry: "
                             "only a spatial layer's hold before its start_layer")
        if batch is not None:
            self.batch = batch
        if desc is not None:
            self.desc, self.geom, self.bounds = desc, self._geometry(desc, geom), False
        if pulse == "prime":
            phase, self.priming = 1, self.PRIME_CYCLES - 1
        elif self.priming:
            phase, self.priming = self.PRIME_CYCLES - self.priming + 1, self.priming - 1
        else:
            phase = 0
        for name in self.PULSES:
            self._set(ctx, name, int(pulse == name or (name == "prime" and phase > 0)))
        self._set(ctx, "begin_chunk", int(pulse in ("start_layer", "start_chunk")))
        self._set(ctx, "desc", self.desc)
        self._set(ctx, "geom", self.geom)
        for name, k in (("k_end", "k_tiles"), ("n_end", "n_tiles")):
            self._set(ctx, name, self.desc[k] - 1 if self.bounds else None)
        self._set(ctx, "last_row", None if self.batch is None else self.batch - 1)
        self.bounds = self.desc is not None
        return phase

    def end_layer(self):
        """The layer is over: ``desc``, ``geom``, ``k_end`` and ``n_end`` are random bits until
        the next ``start_layer``."""
        self.desc = self.geom = None
        self.bounds = False

    def end_run(self):
        """The run is over: ``last_row`` is random bits until the next run's first layer
        starts (and so is what :meth:`end_layer` makes random)."""
        self.end_layer()
        self.batch = None
