"""Compile a quantized network into the memory images and layer descriptors of an accelerator.

:func:`compile_network` (also :func:`hwgen.compile`) checks a :class:`hwgen.nn.QuantizedNetwork`
against an :class:`~hwgen.config.AcceleratorConfig` and lays it out in the memories of
:mod:`hwgen.memmap`:

- :attr:`~hwgen.memmap.Region.WEIGHT`: words of ``cols`` signed ``w_bits`` lanes. Weight tile
  ``(nt, kt)`` of a layer with ``k_tiles = ceil(K / rows)`` occupies the ``rows`` words from
  ``w_base + (nt * k_tiles + kt) * rows``; row ``i``, lane ``j`` holds
  ``W[kt * rows + i, nt * cols + j]`` (zero beyond ``K`` or ``N``). Layers follow one another.
- :attr:`~hwgen.memmap.Region.PARAM`: words of ``cols`` lanes of
  :func:`~hwgen.memmap.param_lane_layout`; output tile ``nt`` is word ``p_base + nt``, lane ``j``
  is channel ``nt * cols + j`` (bias, mult and shift all zero beyond ``N``).
- :attr:`~hwgen.memmap.Region.ACT`: words of ``B = act_lanes`` signed ``in_bits`` lanes. A matrix
  ``[M, F]`` at ``base`` with ``stride = ceil(F / B)`` keeps element ``(m, f)`` in word
  ``base + m * stride + f // B``, lane ``f % B``. The network input starts at word 0; layers
  alternate between two disjoint areas (area 0 from word 0, area 1 right after area 0's largest
  matrix at the compiled batch), so that no layer overwrites what it reads.
- :attr:`~hwgen.memmap.Region.OUTPUT` (a last layer with ``output="raw"`` only): words of
  ``cols`` signed ``acc_bits`` lanes, element ``(m, n)`` in word ``m * stride + n // cols``,
  lane ``n % cols``, with ``stride = ceil(N / cols)``.
- :attr:`~hwgen.memmap.Region.PROGRAM`: one descriptor per layer, laid out by
  :func:`~hwgen.memmap.descriptor_layout` for the configuration.

Every word is a Python ``int``: the unsigned value of its bits, lane ``j`` at bit
``j * lane_bits``, each lane in two's complement.

The modules, in the order the data flow through them:

- :mod:`~hwgen.compiler.for_design`: :func:`compile_for`, a float model quantized with a
  design's widths and compiled (what ``hwgen compile`` does);
- :mod:`~hwgen.compiler.compile`: :func:`compile_network`, the steps below in order;
- :mod:`~hwgen.compiler.proofs`: widths, reductions, the accumulator proof from each
  channel's weights (with :mod:`~hwgen.compiler.ranges`, each tensor's values), channel
  parameters;
- :mod:`~hwgen.compiler.kinds`: each layer lowered to a pass by its pass kind
  (:mod:`hwgen.passes`, which also lays out what differs between kinds);
- :mod:`~hwgen.compiler.activations`: the ping-pong areas of ACT and the batch;
- :mod:`~hwgen.compiler.images`, :mod:`~hwgen.compiler.descriptors`: WEIGHT/PARAM words and
  PROGRAM words, packed by :mod:`~hwgen.compiler.words`;
- :mod:`~hwgen.compiler.program`: the :class:`Program` artifact, which runs through
  :mod:`~hwgen.compiler.codec`, reports through :mod:`~hwgen.compiler.report` and is stored by
  :mod:`~hwgen.compiler.fileformat`;
- :mod:`~hwgen.compiler.specs`, :mod:`~hwgen.compiler.errors`: its records and its error.
"""

from .codec import check_input_rows
from .compile import compile_network
from .errors import CompileError
from .fileformat import FORMAT_VERSION
from .for_design import Compiled, compile_for, design_widths
from .program import Program
from .specs import LayerSpec, MatrixSpec

__all__ = ["FORMAT_VERSION", "CompileError", "Compiled", "LayerSpec", "MatrixSpec", "Program",
           "check_input_rows", "compile_for", "compile_network", "design_widths"]
