"""The model a sweep compiles onto every point, whatever its widths.

A point's operand and accumulator widths are design options, so the sweep needs the model as
an integer network of those widths. Two kinds of source give one:

- :class:`FloatModel`: a float :class:`~hwgen.nn.MLP` with calibration inputs, quantized with
  :func:`hwgen.nn.quantize` for each width tuple a point asks for (the demo's MLP, an ONNX
  file);
- :class:`IntegerModel`: an integer network whose weights are fixed, recovered from a saved
  :class:`~hwgen.compiler.Program` (``.npz``). Its ``in_bits`` and ``w_bits`` are those it was
  quantized to; a point with other operand widths fails with the reason (requantizing needs
  the float model). Wider or narrower ``acc_bits`` and ``mult_bits`` are fine as long as the
  network's values fit them (the arithmetic does not depend on the declared widths; the
  compiler proves that no accumulator overflows).

Sources are pickled to the Dask workers once per sweep and keep the networks they made in a
per-process cache, so a worker quantizes each width tuple once.
"""

import hashlib
from pathlib import Path

import numpy as np

__all__ = ["DEMO_MODEL", "FloatModel", "IntegerModel", "ModelError", "load_model",
           "network_from_program"]

#: The label of the default model in ``results.csv``: the demo's MLP (``hwgen demo``).
DEMO_MODEL = "demo-mlp-64-32-10"
# How the demo trains its MLP (hwgen.cli.demo / hwgen.demo: sizes, seed and epochs).
_DEMO_SIZES, _DEMO_SEED, _DEMO_EPOCHS = [64, 32, 10], 0, 40
# Calibration rows drawn for an ONNX model that comes without calibration data.
_RANDOM_CALIB_ROWS = 256


class ModelError(ValueError):
    """The model cannot be read, or cannot give a network of a point's widths."""


class _Source:
    """Common part: a label, a digest for the results' keys and the per-process cache."""

    label: str
    digest: str

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_cache", None)
        return state

    def network(self, in_bits, w_bits, acc_bits, mult_bits):
        """Return the :class:`~hwgen.nn.QuantizedNetwork` of these widths (cached).

        Raises
        ------
        ModelError
            If the model cannot have these widths, naming why.
        """
        cache = self.__dict__.setdefault("_cache", {})
        key = (in_bits, w_bits, acc_bits, mult_bits)
        if key not in cache:
            try:
                cache[key] = self._make(*key)
            except ModelError as exc:
                cache[key] = exc
            except ValueError as exc:
                cache[key] = ModelError(f"{self.label} at in_bits={in_bits}, w_bits={w_bits}, "
                                        f"acc_bits={acc_bits}, mult_bits={mult_bits}: {exc}")
        found = cache[key]
        if isinstance(found, Exception):
            raise found
        return found

    def _make(self, in_bits, w_bits, acc_bits, mult_bits):
        raise NotImplementedError


class FloatModel(_Source):
    """A float MLP and its calibration inputs, quantized to each width tuple on demand.

    Parameters
    ----------
    mlp : hwgen.nn.MLP
    calib_x : array_like of float, shape (M, K)
        Calibration inputs for :func:`hwgen.nn.quantize`.
    label : str
        Names the model in ``results.csv`` and in messages.
    output : {"raw", "requant"}
        What the last layer returns (raw logits, as the demo does, by default).
    """

    def __init__(self, mlp, calib_x, *, label, output="raw"):
        self.mlp = mlp
        self.calib_x = np.asarray(calib_x, dtype=np.float64)
        self.label = label
        self.output = output
        h = hashlib.sha256(label.encode())
        for weight, bias in mlp.layers:
            h.update(np.ascontiguousarray(weight, dtype=np.float64).tobytes())
            h.update(np.ascontiguousarray(bias, dtype=np.float64).tobytes())
        h.update(np.asarray(mlp.relu, dtype=bool).tobytes())
        h.update(self.calib_x.tobytes())
        self.digest = h.hexdigest()[:16]

    def _make(self, in_bits, w_bits, acc_bits, mult_bits):
        from ..nn import quantize

        return quantize(self.mlp, self.calib_x, in_bits=in_bits, w_bits=w_bits,
                        acc_bits=acc_bits, mult_bits=mult_bits, output=self.output)


class IntegerModel(_Source):
    """An integer network with fixed weights (operand widths fixed too).

    Parameters
    ----------
    network : hwgen.nn.QuantizedNetwork
    label : str
    digest : str
        Identifies the network's values in ``results.csv`` keys (e.g. of the file it came from).
    """

    def __init__(self, network, *, label, digest):
        self.layers = [(layer.weight, layer.bias, layer.mult, layer.shift,
                        {"activation": layer.activation, "output": layer.output,
                         "mult_neg": layer.mult_neg, "act_min": layer.act_min,
                         "act_max": layer.act_max})
                       for layer in network.layers]
        self.in_bits = network.in_bits
        self.w_bits = network.w_bits
        self.label = label
        self.digest = digest

    def _make(self, in_bits, w_bits, acc_bits, mult_bits):
        from ..nn import Dense, QuantizedNetwork

        if (in_bits, w_bits) != (self.in_bits, self.w_bits):
            raise ModelError(
                f"{self.label} is an integer network of in_bits={self.in_bits}, "
                f"w_bits={self.w_bits}; this point has in_bits={in_bits}, w_bits={w_bits} "
                f"(other operand widths need the float model, e.g. an .onnx file)")
        layers = [Dense(w, b, m, s, **kw) for w, b, m, s, kw in self.layers]
        return QuantizedNetwork(layers, in_bits=in_bits, w_bits=w_bits, acc_bits=acc_bits,
                                mult_bits=mult_bits)


# -- recovering a network from a program ------------------------------------------------------

def _lanes(words, lanes, lane_bits):
    """Return ``[len(words), lanes]`` unsigned lane values of packed words (lane 0 lowest)."""
    mask = (1 << lane_bits) - 1
    return np.array([[(word >> (j * lane_bits)) & mask for j in range(lanes)] for word in words],
                    dtype=object).reshape(len(words), lanes)


def _signed(values, bits):
    values = np.asarray(values, dtype=object)
    return np.where(values >= 1 << (bits - 1), values - (1 << bits), values).astype(np.int64)


def network_from_program(program):
    """Return the :class:`~hwgen.nn.QuantizedNetwork` a program was compiled from.

    Reads the weights and the per-channel bias, multiplier, shift (and a leaky layer's
    ``mult_neg``) back out of the WEIGHT and PARAM images, as :mod:`hwgen.compiler` laid them
    out, and the bounds from the descriptors (given only where they differ from the
    activation's own); the network has the program's configuration's widths. Compiling it for
    the same configuration gives the same images.
    """
    from ..memmap import Region, param_lane_layout
    from ..nn import Dense, QuantizedNetwork

    config = program.config
    r, c = config.rows, config.cols
    weights = program.images[Region.WEIGHT][1]
    params = program.images[Region.PARAM][1]
    layout = param_lane_layout(config)
    layers = []
    low, high = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    for spec, d in zip(program.layers, program.descriptors, strict=True):
        words = weights[spec.w_base:spec.w_base + spec.w_words]
        lanes = _signed(_lanes(words, c, config.w_bits), config.w_bits)
        if d.get("geometry", {}).get("wdiag"):
            # one word a tile, its diagonal: row i is the word's lane i
            lanes = (lanes.reshape(-1, 1, c) * np.eye(r, c, dtype=lanes.dtype)).reshape(-1, c)
        # word (nt * k_tiles + kt) * rows + i, lane j holds W[kt * rows + i, nt * cols + j]
        tiles = lanes.reshape(spec.n_tiles, spec.k_tiles, r, c).transpose(1, 2, 0, 3)
        weight = tiles.reshape(spec.k_tiles * r, spec.n_tiles * c)[:spec.k, :spec.n]
        lanes = _lanes(params[spec.p_base:spec.p_base + spec.p_words], c, layout.size)
        fields = {}
        for name, field in layout:
            raw = (lanes >> field.offset) & ((1 << field.width) - 1)
            raw = raw.reshape(-1)[:spec.n]
            fields[name] = (_signed(raw, field.width) if field.shape.signed
                            else raw.astype(np.int64))
        extra = {}
        if spec.activation == "leaky_relu":
            extra["mult_neg"] = fields["mult_neg"]
        default = (0 if spec.activation == "relu" else low, high)
        if spec.output != "raw" and "act_min" in d and (d["act_min"], d["act_max"]) != default:
            extra.update(act_min=d["act_min"], act_max=d["act_max"])
        layers.append(Dense(weight.copy(), fields["bias"], fields["mult"], fields["shift"],
                            activation=spec.activation, output=spec.output, **extra))
    return QuantizedNetwork(layers, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=config.acc_bits, mult_bits=config.mult_bits)


# -- loading ----------------------------------------------------------------------------------

def _demo_model():
    from ..nn import MLP, load_digits_split

    x_train, y_train, _, _ = load_digits_split()
    mlp = MLP(_DEMO_SIZES, seed=_DEMO_SEED).fit(x_train, y_train, epochs=_DEMO_EPOCHS,
                                                seed=_DEMO_SEED)
    return FloatModel(mlp, x_train, label=DEMO_MODEL)


def _calibration(path, features):
    if path is None:
        if features == _DEMO_SIZES[0]:
            from ..nn import load_digits_split

            return load_digits_split()[0], "the digits training split"
        rng = np.random.default_rng(0)
        return (rng.standard_normal((_RANDOM_CALIB_ROWS, features)),
                f"{_RANDOM_CALIB_ROWS} standard normal rows")
    try:
        calib = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: not a NumPy .npy file of calibration inputs ({exc})") \
            from None
    if not isinstance(calib, np.ndarray) or calib.ndim != 2 or calib.shape[1] != features \
            or not len(calib) or not np.issubdtype(calib.dtype, np.number):
        shape = getattr(calib, "shape", None)
        raise ModelError(f"{path}: calibration inputs of shape {shape}; allowed: a numeric "
                         f"array of shape (M, {features}) with M >= 1")
    return calib.astype(np.float64), str(path)


def load_model(path=None, *, calib=None):
    """Return the model source of a sweep.

    Parameters
    ----------
    path : path-like, optional
        ``None``: the demo's 64-32-10 MLP trained on the digits (as ``hwgen demo`` trains it);
        an ``.npz`` saved :class:`~hwgen.compiler.Program` (its integer network, see
        :class:`IntegerModel`); an ``.onnx`` model of dense layers and ReLUs.
    calib : path-like, optional
        For an ONNX model: a ``.npy`` array of float inputs ``(M, K)`` to calibrate the
        quantization with. By default the digits training split for a model of 64 inputs,
        else 256 rows of a standard normal distribution (enough for the fit, cycle and
        throughput figures a sweep records; not for accuracy).

    Raises
    ------
    ModelError
        Naming the file and the problem: an unknown suffix, a file that cannot be read, an
        unsupported model, calibration data of the wrong shape.
    OSError
        If the file cannot be opened.
    """
    if path is None:
        if calib is not None:
            raise ModelError("calibration data applies to an .onnx model only")
        return _demo_model()
    path = Path(path)
    suffix = path.suffix.lower()
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:16]
    if suffix == ".npz":
        if calib is not None:
            raise ModelError(f"{path}: a saved program is already quantized; calibration "
                             f"data applies to an .onnx model only")
        from ..compiler import Program

        try:
            program = Program.load(path)
        except ValueError as exc:   # names the file and the problem
            raise ModelError(str(exc)) from None
        return IntegerModel(network_from_program(program), label=path.name, digest=digest)
    if suffix == ".onnx":
        from ..nn import from_onnx

        try:
            mlp = from_onnx(path)
        except ImportError as exc:
            raise ModelError(f"{path}: {exc}") from None
        except ValueError as exc:
            raise ModelError(f"{path}: {exc}") from None
        x, _ = _calibration(calib, mlp.in_features)
        return FloatModel(mlp, x, label=path.name)
    raise ModelError(f"{path}: unknown model file type {suffix or '(none)'!r}; allowed: .npz "
                     f"(a saved hwgen program), .onnx")
