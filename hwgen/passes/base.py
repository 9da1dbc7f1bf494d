"""What a pass kind provides: :class:`Pass`, the base class of the modules of :mod:`hwgen.passes`.

A pass kind is one :class:`~hwgen.memmap.PassKind` and one module holding everything that
differs between kinds: the compiler's lowering and layout (the *compiler hooks*), the cycle
model (the *cycle hooks*) and the step of the program interpreter (the *interpreter hooks*).
Everything else asks the registry (:func:`hwgen.passes.lookup`) and never tests a kind.

The interpreter hooks are the test oracle of the compiler's layout, so they use only the
interpreter they are given (its memories and its walk of the geometry), the memory map and
their own arithmetic; never the compiler's lowering or images.
"""

import abc
import dataclasses

__all__ = ["Lowered", "Pass", "signed_range"]


def signed_range(bits):
    """Return ``(lowest, highest)`` of signed ``bits``-bit integers."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


@dataclasses.dataclass(frozen=True)
class Lowered:
    """What a kind's lowering makes of a network layer (the rest of a
    :class:`~hwgen.compiler.kinds.DeviceLayer` is the same for every kind).

    Attributes
    ----------
    matrix : hwgen.nn.Dense or None
        The weights, biases and requantization the array runs with (None: the pass has none).
    k : int
        The reduction per output (0 without a matrix).
    kernel : tuple or None
        ``(kh, kw, (sy, sx), (top, bottom, left, right), window)`` of a pass that walks images
        (``window``: the channels each output tile's channel window moves on, 0 for none, see
        :func:`~hwgen.memmap.geometry_layout`'s ``cb_word``); None for a pass over rows.
    repeat : bool
        The layer's weight tiles are all alike by construction (an average pool's), so that
        WEIGHT may hold one (the geometry's ``wrep``).
    grouped : bool
        The layer is a grouped convolution or an average pool: where its weight tiles are zero
        off their diagonals (a depthwise convolution's), WEIGHT holds one word a tile (the
        geometry's ``wdiag``).
    params : object
        What else the kind's layout needs of the layer (an ADD pass: its per-channel
        multipliers, shift and bounds); None for none.
    out_shape : tuple or None
        The per-sample shape of the tensor the pass writes as it lays it out, where that
        differs from the layer's (an ADD pass of two flattened images writes an image, whose
        words are already in ``(h, w, c)`` order); None: the layer's.
    """

    matrix: object
    k: int
    kernel: tuple | None
    repeat: bool = False
    grouped: bool = False
    params: object = None
    out_shape: tuple | None = None


class Pass(abc.ABC):
    """One pass kind: its compiler, cycle and interpreter hooks.

    Attributes
    ----------
    kind : PassKind
        The descriptor's ``kind`` of the passes it makes.
    layers : tuple of type
        The :mod:`hwgen.nn` layer types it lowers (matched with ``isinstance``, in registry
        order).
    spatial_only : bool
        Its passes always walk images (their descriptors are ``spatial``).
    cycle_fields : tuple of str
        The descriptor fields its cycle model reads, besides ``kind``, ``spatial`` and the
        geometry (a cache of counts keys on them: :mod:`hwgen.dse.points`).
    """

    kind = None
    layers = ()
    spatial_only = False
    cycle_fields = ()

    # -- compiler hooks -------------------------------------------------------------------

    def accepts(self, layer, in_shape, config):
        """Return whether this kind runs network layer ``layer`` (one of :attr:`layers`) on
        ``config`` given its per-sample input shape ``in_shape``; a kind that declines leaves
        the layer to the next kind in the registry that lowers its type. Every layer by
        default."""
        return True

    @abc.abstractmethod
    def lower(self, index, layer, shapes, config):
        """Return the :class:`Lowered` pass of network layer ``index``, ``layer``, whose
        per-sample ``shapes`` are ``(in_shape, out_shape)`` (a Flatten before it already
        folded into ``in_shape``; a layer of several inputs: their one stored shape), proved
        to fit ``config``.

        Raises
        ------
        CompileError
            If the layer does not fit ``config``.
        """

    @abc.abstractmethod
    def place(self, p, config, w_base, p_base):
        """Return the kind's fields of the :class:`~hwgen.compiler.LayerSpec` of pass ``p``
        (a :class:`~hwgen.compiler.kinds.DeviceLayer`): ``k, n, k_tiles, n_tiles,
        activation, output, w_base, w_words, p_base, p_words``, its images placed from word
        ``w_base`` of WEIGHT and ``p_base`` of PARAM (the compiler checks that they fit)."""

    @abc.abstractmethod
    def fields(self, p, spec):
        """Return the descriptor fields of pass ``p`` (with ``spec``, its LayerSpec) whose
        meaning depends on the kind: ``{"n": ...}``, and the activation's ``leaky``,
        ``act_min``, ``act_max`` where they are not a plain requantization's (not leaky, the
        saturation range); the compiler turns those into a design's own fields."""

    @abc.abstractmethod
    def cgs(self, p, config, src_stride):
        """Return the geometry's ``cgs`` of spatial pass ``p`` whose input pixels take
        ``src_stride`` ACT words (:func:`hwgen.memmap.geometry_layout`)."""

    def walk_fields(self, p, config, src_stride=1):
        """Return the geometry fields of spatial pass ``p`` (whose input pixels take
        ``src_stride`` ACT words) that its kind decides besides ``cgs``: ``{"wrep": ...}``,
        or steps of its own (:func:`~hwgen.memmap.geometry_layout`), over the convolution's
        walk; none by default."""
        return {}

    @abc.abstractmethod
    def images(self, p, config):
        """Return ``(weight words, parameter words)`` of pass ``p``, in the order
        :meth:`place` placed them (empty lists: none)."""

    @abc.abstractmethod
    def macs(self, spec, config):
        """Return ``(useful, issued)`` multiply-accumulates per sample of the pass of
        ``spec``: the layer's own, and what the array issues for its padded tiles."""

    # -- cycle hooks ----------------------------------------------------------------------

    @abc.abstractmethod
    def cycles(self, config, d, g, m, chunk, *, implementation=None):
        """Return the cycles the pass of descriptor ``d`` and geometry ``g`` (of a pass over
        rows: ``oh = ow = kh = kw = 1``) takes on a batch of ``m`` samples, from FETCH on, its
        geometry words not counted (:func:`hwgen.cycles.layer_cycles` adds them).
        ``chunk(k_tiles, n_tiles, rows, raw)`` is the array's model of a chunk of ``rows``
        output pixels (:func:`hwgen.cycles.chunk_cycles`); ``implementation`` is the
        :class:`~hwgen.implementation.Implementation` the device is built with (None: the
        plain one), for a kind whose unit's latency depends on it
        (:func:`hwgen.timing.unit_latencies`, on which a sweep's cycle cache keys:
        :mod:`hwgen.dse.points`)."""

    @abc.abstractmethod
    def busy_rows(self, d, g, m):
        """Return the rows the pass puts through the array on ``m`` samples (what it adds to
        the device's ``busy_cycles``); ``g`` as for :meth:`cycles`."""

    # -- interpreter hooks ----------------------------------------------------------------

    @abc.abstractmethod
    def interpret(self, device, d, g, m):
        """Run the pass of descriptor ``d`` and geometry ``g`` on ``m`` samples in ``device``
        (a :class:`sim.interpreter.ProgramInterpreter`), as the device does."""

    @abc.abstractmethod
    def output_rows(self, d, channels):
        """Return ``(words per output pixel, features)`` of the output the pass of ``d``
        writes from ``dst_base``; ``channels`` is the caller's count of the network's output
        channels, for a kind whose descriptor does not hold it."""
