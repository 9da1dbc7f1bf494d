"""The compiled program: memory images, descriptors and where its input and output live."""

import dataclasses

from ..config import AcceleratorConfig
from ..nn.output_function import scores_to_probabilities
from . import codec, fileformat, report
from .bf16 import bf16_input_lanes, bf16_output_values
from .specs import MatrixSpec

__all__ = ["Program"]


@dataclasses.dataclass(frozen=True, eq=True)
class Program:
    """A network compiled for one accelerator configuration: memory images and descriptors.

    Built by :func:`compile_network` or :meth:`load`; treat it as read-only. To run it, write
    every entry of :attr:`images` to its region at its base, write :meth:`pack_input` words at
    :attr:`input` ``.base`` of ACT, start the program on ``m <= batch`` rows, read
    :meth:`output_words` and decode them with :meth:`unpack_output`. A program compiled with
    ``readout=True`` also keeps every layer's output of the run: read layer ``i``'s with
    :meth:`layer_output_words` and :meth:`unpack_layer_output`.

    Attributes
    ----------
    config : AcceleratorConfig
    config_hash : str
        ``config.hash``, as the device reports it.
    batch : int
        Rows one run can process (1..``acc_depth``); the activation and output memories are laid
        out for it.
    descriptors : tuple of dict
        The fields of each layer's descriptor (:func:`~hwgen.memmap.descriptor_layout`),
        by name.
    layers : tuple of LayerSpec
    images : dict
        ``{Region: (base, [word, ...])}`` for PROGRAM, WEIGHT and PARAM.
    input, output : MatrixSpec
        Where the network's input goes and where its output appears.
    macs_per_row : int
        ``sum K * N`` over the layers: useful multiply-accumulates per input row.
    padded_macs_per_row : int
        ``sum k_tiles * rows * n_tiles * cols``: what the array performs per input row.
    layer_outputs : tuple of MatrixSpec
        Where each layer's output is after a run (the last one is :attr:`output`), for a
        program compiled with ``readout=True``; empty otherwise (the layers' areas are reused).
    output_mode : str or tuple
        What :meth:`host.Accelerator.infer` returns unless told otherwise: ``"scores"`` (the
        network's output), ``"argmax"`` or ``("top_k", k)`` (class indices,
        :mod:`hwgen.compiler.classes`); from ``hwgen.compile(..., output=...)``.
    """

    config: AcceleratorConfig
    config_hash: str
    batch: int
    descriptors: tuple
    layers: tuple
    images: dict
    input: MatrixSpec
    output: MatrixSpec
    macs_per_row: int
    padded_macs_per_row: int
    layer_outputs: tuple = ()
    output_function: str | None = None
    output_scale: tuple | None = None
    output_mode: object = "scores"

    # -- running (hwgen.compiler.codec) -----------------------------------------------------------

    def pack_input(self, x):
        """Return the ACT words of the input rows ``x``, to be written at :attr:`input` base.

        Parameters
        ----------
        x : array_like of int, shape (M, K) or (M, H, W, C)
            Signed ``in_bits`` inputs (a ``dtype="bf16"`` design: finite bf16 values, as
            :meth:`hwgen.nn.Bf16Network.quantize_input` gives them), ``0 <= M <= batch``,
            each sample of the network's input shape (``K`` features, or an NHWC image when
            the first layer is spatial).

        Returns
        -------
        list of int
            ``input.words(M)`` words, the samples' element stream (see
            :class:`~hwgen.compiler.specs.MatrixSpec`); every other lane is zero.

        Raises
        ------
        ValueError
            Naming the problem: a non-integer dtype, a wrong shape, too many rows or a value
            outside signed ``in_bits``.
        """
        if self.config.dtype == "bf16":
            x = bf16_input_lanes(x, "pack_input")
        return codec.pack_input(self.input, self.batch, x)

    def output_words(self, m):
        """Return ``(region, base, count)``: the words to read back after a run on ``m`` rows."""
        return codec.output_words(self.output, self.batch, m)

    def unpack_output(self, words, m):
        """Decode the words read from :meth:`output_words` into the network's output.

        Parameters
        ----------
        words : sequence of int
            Exactly the count :meth:`output_words` gives, from its base.
        m : int
            Rows of the run, ``0 .. batch``.

        Returns
        -------
        numpy.ndarray of int64, shape (m, N) or (m, H', W', C')
            Saturated activations (``requant``) or accumulators (``raw``), as
            :meth:`hwgen.nn.QuantizedNetwork.forward` returns them (a ``dtype="bf16"``
            design: bf16 values, or fp32 scores, as :meth:`hwgen.nn.Bf16Network.forward`)
            (images when the last layer is spatial). Padding lanes are ignored.

        Raises
        ------
        ValueError
            If ``m`` is out of range, the word count is wrong or a word is not an unsigned
            integer of the region's width.
        """
        values = codec.unpack_output(self.output, self.batch, words, m)
        return bf16_output_values(self, values)

    def _layer_output(self, index, what):
        if not self.layer_outputs:
            raise ValueError(f"{what}: the program was compiled without read-out, so the layers' "
                             "outputs are overwritten during a run; compile it with "
                             "hwgen.compile(network, config, readout=True)")
        count = len(self.layer_outputs)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise ValueError(f"{what}: layer {index!r}; allowed: an integer in 0..{count - 1}")
        return self.layer_outputs[index]

    def layer_output_words(self, index, m):
        """Return ``(region, base, count)``: the words of layer ``index``'s output after a run
        on ``m`` rows (a program compiled with ``readout=True``).

        Raises
        ------
        ValueError
            If the program has no read-out (saying how to compile one), or ``index`` or ``m``
            is out of range.
        """
        spec = self._layer_output(index, "layer_output_words")
        return codec.output_words(spec, self.batch, m)

    def unpack_layer_output(self, index, words, m):
        """Decode the words read from :meth:`layer_output_words` into layer ``index``'s output.

        Returns
        -------
        numpy.ndarray of int64, shape (m, N_index)
            As :meth:`hwgen.nn.QuantizedNetwork.forward_trace` returns ``outputs[index]``.

        Raises
        ------
        ValueError
            As for :meth:`layer_output_words` and :meth:`unpack_output`.
        """
        spec = self._layer_output(index, "unpack_layer_output")
        return codec.unpack_output(spec, self.batch, words, m)

    def probabilities(self, scores):
        """Return the network's output function applied in float to the device's ``scores``
        (:meth:`unpack_output`'s, or ``host.Accelerator.infer``'s).

        ``scores * output_scale`` are the real logits; without an output function they are
        returned as they are (float64).

        Raises
        ------
        ValueError
            If the program has no ``output_scale`` (:meth:`check_probabilities`).
        """
        self.check_probabilities("probabilities")
        return scores_to_probabilities(self.output_function, scores, self.output_scale)

    def check_probabilities(self, where):
        """Raise ``ValueError`` (prefixed ``where``) unless :meth:`probabilities` can run: the
        program needs the ``output_scale`` of its network."""
        if self.output_scale is None:
            raise ValueError(f"{where}: the program has no output_scale (its network was built "
                             "without one); allowed: a program compiled from a quantized or "
                             "imported model, e.g. hwgen.nn.quantize(...)")

    # -- reporting (hwgen.compiler.report) --------------------------------------------------------

    def summary(self):
        """Return a short table of the layers and the memory use, for people."""
        return report.summary(self)

    # -- files (hwgen.compiler.fileformat) --------------------------------------------------------

    def save(self, path):
        """Write the program to one ``.npz`` file at ``path`` (exactly that name).

        The file holds a JSON metadata entry and one byte array per image (little-endian
        words); :meth:`load` needs neither the network nor the training code.
        """
        fileformat.save(self, path)

    @classmethod
    def load(cls, path):
        """Read a program written by :meth:`save`.

        Raises
        ------
        ValueError
            Naming the file and the problem, if it is not such a file, is of another format
            version, or is damaged (a digest or a cross-check fails).
        OSError
            If the file cannot be opened.
        """
        return cls(**fileformat.read(path))
