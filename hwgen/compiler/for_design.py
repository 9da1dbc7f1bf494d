"""A float model compiled for a design in one call: quantized with the design's widths.

:func:`compile_for` is what ``hwgen compile`` does in Python: the network it compiles has the
configuration's operand, accumulator and multiplier widths (:func:`design_widths`), so the
only refusals left are those of the design's size, which :func:`compile_network` names (with
the designs that would hold it).
"""

import typing

from ..nn import CNN, MLP, QuantizedNetwork, quantize, to_bf16
from .compile import compile_network

__all__ = ["Compiled", "compile_for", "design_widths"]


class Compiled(typing.NamedTuple):
    """What :func:`compile_for` returns: the integer (or bf16) network and its program.

    ``network.quantize_input(x)`` turns float inputs into the program's;
    ``network.forward`` is the reference the device must equal.
    """

    network: QuantizedNetwork
    program: object   # hwgen.compiler.Program


def design_widths(config):
    """Return the quantization widths of ``config``: ``{"in_bits", "w_bits", "acc_bits",
    "mult_bits"}``, the keywords of :func:`hwgen.nn.quantize`."""
    return {name: getattr(config, name) for name in ("in_bits", "w_bits", "acc_bits",
                                                     "mult_bits")}


def compile_for(model, config, calibration=None, *, output="raw", batch=None, readout=False):
    """Quantize ``model`` with the widths of ``config`` and compile it for ``config``.

    On a ``dtype="bf16"`` design a float model is rounded instead (:func:`hwgen.nn.to_bf16`
    with the design's ``rows``, ``output="requant"`` giving bf16 outputs; ``calibration`` is
    not needed and is ignored), and a :class:`~hwgen.nn.Bf16Network` is compiled as it is.

    Parameters
    ----------
    model : hwgen.nn.MLP, hwgen.nn.CNN or hwgen.nn.QuantizedNetwork
        A float model (trained, or imported with :func:`hwgen.nn.from_torch` /
        :func:`~hwgen.nn.from_onnx`), or an integer network, compiled as it is.
    config : hwgen.AcceleratorConfig
    calibration : array_like of float, optional
        Inputs that calibrate the activation scales, ``(M, K)`` rows or NHWC images ``(M, H,
        W, C)``; required for a float model, not allowed for an integer one.
    output : {"raw", "requant"}
        What the last layer returns (raw accumulators by default, as logits).
    batch, readout
        As for :func:`hwgen.compile`.

    Returns
    -------
    Compiled
        ``(network, program)``.

    Raises
    ------
    TypeError
        If ``model`` is none of the types above.
    ValueError
        If a float model comes without calibration inputs, or they have the wrong shape
        (naming the shape allowed), or an integer model comes with them.
    CompileError
        If the network does not fit the design: each refusal names the layer, the buffer or
        field, the need and the limit, and the designs that would hold it.
    """
    if config.dtype == "bf16" and (isinstance(model, MLP | CNN)
                                   or getattr(model, "dtype", None) == "bf16"):
        # Nothing to calibrate: bf16 weights and fp32 biases, summed in the design's rows.
        network = to_bf16(model, rows=config.rows, output="raw" if output == "raw" else
                          "bf16") if isinstance(model, MLP | CNN) else model
    elif isinstance(model, QuantizedNetwork):
        if calibration is not None:
            raise ValueError("compile_for: the model is already quantized; calibration "
                             "applies to a float model (hwgen.nn.MLP, CNN or an imported one)")
        network = model
    elif isinstance(model, MLP | CNN):
        if calibration is None:
            shape = ", ".join(map(str, model.shapes[0][0] if isinstance(model, CNN)
                                  else (model.in_features,)))
            raise ValueError(f"compile_for: a float model needs calibration inputs to set its "
                             f"activation scales; allowed: calibration= a float array of "
                             f"shape (M, {shape}), e.g. some training inputs")
        network = quantize(model, calibration, output=output, **design_widths(config))
    else:
        raise TypeError(f"compile_for: model is a {type(model).__name__}; allowed: "
                        "hwgen.nn.MLP, CNN (float, e.g. from_onnx) or QuantizedNetwork")
    return Compiled(network, compile_network(network, config, batch=batch, readout=readout))
