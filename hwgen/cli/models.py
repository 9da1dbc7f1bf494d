"""The models ``hwgen compile`` takes: a file (ONNX, a saved program, a pickled hwgen.nn
model) or a model by name (the demo's ``mlp`` and ``cnn``, the zoo's :data:`hwgen.models.MODELS`).

:func:`load_source` returns a :class:`Source`: the model, and for a model by name the data it
brings (calibration inputs and a few samples to run), so that a named model needs no file.
"""

import dataclasses
import pickle
from pathlib import Path

import numpy as np

from .options import UsageError, input_file

__all__ = ["DEMO_MODELS", "SAMPLES", "Source", "load_array", "load_source", "train_demo"]

#: The demo's models (``hwgen demo --model``), trained as the demo trains them.
DEMO_MODELS = {"mlp": "mlp (the demo's 64-32-10 MLP, trained on the digits)",
               "cnn": "cnn (the demo's digits CNN: conv 3x3 8, pool 2, conv 3x3 16, pool 2, "
                      "dense 10)"}
# Samples a named model brings for `--save-input`: a few, as a netlist simulation is slow.
SAMPLES = 16


@dataclasses.dataclass
class Source:
    """A model to compile and what came with it.

    ``model`` is a float :class:`~hwgen.nn.MLP` / :class:`~hwgen.nn.CNN`, a
    :class:`~hwgen.nn.QuantizedNetwork` or a :class:`~hwgen.compiler.Program`;
    ``calibration`` and ``samples`` are float inputs of a named model (else ``None``).
    """

    model: object
    what: str
    calibration: np.ndarray | None = None
    samples: np.ndarray | None = None


def _allowed():
    from hwgen.models import MODELS

    return ("allowed: FILE.onnx, FILE.npz (a saved program), FILE.pkl (a pickled hwgen.nn "
            f"MLP, CNN or QuantizedNetwork), or a model by name: {', '.join(DEMO_MODELS)} "
            f"(the demo's), {', '.join(MODELS)} (the zoo's, with torch)")


def train_demo(name):
    """Return ``(float model, training inputs, test inputs, test labels)`` of the demo's model
    ``name`` ("mlp": the 64-32-10 MLP trained 40 epochs, "cnn": the CNN trained 30; seed 0)
    on the bundled digits."""
    from hwgen.nn import MLP, load_digits_images, load_digits_split, train_digits_cnn

    if name == "mlp":
        x_train, y_train, x_test, y_test = load_digits_split()
        model = MLP([64, 32, 10], seed=0).fit(x_train, y_train, epochs=40, seed=0)
    else:
        x_train, _, x_test, y_test = load_digits_images()
        model = train_digits_cnn(epochs=30, seed=0)
    return model, x_train, x_test, y_test


def _demo(name):
    model, x_train, x_test, _ = train_demo(name)
    return Source(model, DEMO_MODELS[name], x_train, x_test[:SAMPLES])


def _zoo(name):
    from hwgen.models import get
    from hwgen.nn import from_torch

    zoo = get(name)
    try:
        model = from_torch(zoo.model(), input_shape=zoo.input_shape)
    except ImportError as exc:
        raise UsageError(f"MODEL {name}: the zoo's models need torch ({exc})") from None
    return Source(model, f"{name} (the zoo's, seeded weights)", zoo.calibration(64),
                  zoo.calibration(SAMPLES, seed=1))


def _file(path):
    from hwgen.compiler import Program
    from hwgen.nn import CNN, MLP, QuantizedNetwork, from_onnx

    input_file(path, "MODEL")
    suffix = path.suffix.lower()
    try:
        if suffix == ".onnx":
            return Source(from_onnx(path), f"{path.name} (ONNX)")
        if suffix == ".npz":
            return Source(Program.load(path), f"{path.name} (a saved program)")
        if suffix in (".pkl", ".pickle"):
            with path.open("rb") as f:
                model = pickle.load(f)   # the user's own file, as torch.load would read it
            if not isinstance(model, MLP | CNN | QuantizedNetwork):
                raise ValueError(f"holds a {type(model).__name__}; allowed: a pickled "
                                 "hwgen.nn MLP, CNN or QuantizedNetwork")
            return Source(model, f"{path.name} ({type(model).__name__})")
    except ImportError as exc:
        raise UsageError(f"MODEL {path}: {exc}") from None
    except (ValueError, TypeError, pickle.UnpicklingError, EOFError) as exc:
        raise UsageError(f"MODEL {path}: {exc}") from None
    raise UsageError(f"MODEL {path}: unknown file type {suffix or '(none)'!r}; {_allowed()}")


def load_source(text):
    """Return the :class:`Source` that ``MODEL`` (``text``) names.

    Raises
    ------
    UsageError
        Naming the model and what is allowed, if it is no file or name of a model, or the
        file cannot be read as one.
    """
    from hwgen.models import MODELS

    if text in DEMO_MODELS:
        return _demo(text)
    if text in MODELS:
        return _zoo(text)
    path = Path(text)
    if not path.exists():
        raise UsageError(f"MODEL {text}: no such file, nor a model's name; {_allowed()}")
    return _file(path)


def load_array(path, option):
    """Return the numeric array in the ``.npy`` file ``path`` of ``option`` (as float64)."""
    input_file(path, option)
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{option} {path}: cannot read a .npy array ({exc})") from None
    if not isinstance(x, np.ndarray) or not np.issubdtype(x.dtype, np.number) or x.ndim < 2:
        raise UsageError(f"{option} {path}: holds {getattr(x, 'dtype', type(x).__name__)} of "
                         f"shape {getattr(x, 'shape', None)}; allowed: a numeric array of "
                         "samples, (M, features) or NHWC images (M, H, W, C)")
    return x.astype(np.float64)
