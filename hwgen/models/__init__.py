"""The model zoo: PyTorch definitions of the models peers publish FPGA figures for.

The MLPerf Tiny reference models as its training code (mlcommons/tiny,
``benchmark/training``) defines them, and two classics:

===============  ==========================================================  ==============
name             model                                                       input (NHWC)
===============  ==========================================================  ==============
``ad``           anomaly detection: FC autoencoder 640-128x4-8-128x4-640      (640,)
``kws``          keyword spotting: DS-CNN                                    (49, 10, 1)
``vww``          visual wake words: MobileNetV1 0.25                         (96, 96, 3)
``resnet8``      image classification: ResNet-8 (a graph: residual blocks)   (32, 32, 3)
``lenet5``       LeNet-5 with average pooling                                (32, 32, 1)
``tutorial_cnn`` Conv-BN-ReLU-MaxPool x2, Dropout, Linear                    (28, 28, 1)
===============  ==========================================================  ==============

Each is a :class:`ZooModel`: ``get("kws").model(seed)`` builds the PyTorch module (seeded
random weights, BatchNorm statistics of calibration data: nothing is downloaded), and
``get("kws").calibration(n)`` gives calibration inputs of the right shape::

    from hwgen.models import get
    from hwgen.nn import from_torch, quantize

    zoo = get("kws")
    float_model = from_torch(zoo.model(), input_shape=zoo.input_shape)
    net = quantize(float_model, zoo.calibration(64))
"""

from .anomaly_detection import AD_AUTOENCODER
from .keyword_spotting import KWS_DS_CNN
from .lenet5 import LENET5
from .resnet8 import RESNET8
from .tutorial_cnn import TUTORIAL_CNN
from .visual_wake_words import VWW_MOBILENET
from .zoo import ZooModel, count_macs, count_params

__all__ = ["MODELS", "ZooModel", "count_macs", "count_params", "get"]

#: Every model of the zoo by name, in the order of the table above.
MODELS = {m.name: m for m in (AD_AUTOENCODER, KWS_DS_CNN, VWW_MOBILENET, RESNET8, LENET5,
                              TUTORIAL_CNN)}


def get(name):
    """Return the :class:`ZooModel` called ``name``.

    Raises
    ------
    KeyError
        Naming the unknown model and the models there are.
    """
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"no model {name!r} in the zoo; allowed: {', '.join(MODELS)}") from None
