"""The MLPerf Tiny anomaly-detection model: the fully connected autoencoder (FC-AE).

As ``benchmark/training/anomaly_detection/keras_model.py`` of mlcommons/tiny defines it
(``get_model(640)``: 5 frames x 128 log-mel bands in, the same out): Dense 128 four times,
Dense 8, Dense 128 four times, each followed by BatchNormalization and ReLU, then Dense 640
with no activation.

Size: 267,928 trainable parameters (265,864 weights and biases, 2,064 BatchNorm scales and
shifts; Keras's ``model.summary()`` of the reference counts 269,992 with the moving means and
variances) and 264,192 MACs, one per weight. MLPerf Tiny quotes the int8 model as 270 KB
(Banbury et al., "MLPerf Tiny Benchmark", NeurIPS 2021 Datasets and Benchmarks).
"""

import itertools

from .zoo import ZooModel

__all__ = ["AD_AUTOENCODER"]

_WIDTHS = (640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640)


def _build(torch):
    nn = torch.nn
    layers = []
    for index, (k, n) in enumerate(itertools.pairwise(_WIDTHS)):
        layers.append(nn.Linear(k, n))
        if index < len(_WIDTHS) - 2:
            layers += [nn.BatchNorm1d(n), nn.ReLU()]
    return nn.Sequential(*layers)


AD_AUTOENCODER = ZooModel(
    name="ad", title="MLPerf Tiny anomaly detection: FC autoencoder 640-128x4-8-128x4-640",
    input_shape=(640,), params=267_928, macs=264_192, build_fn=_build)
