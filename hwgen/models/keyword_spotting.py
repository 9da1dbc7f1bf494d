"""The MLPerf Tiny keyword-spotting model: DS-CNN (depthwise-separable CNN).

As ``benchmark/training/keyword_spotting/keras_model.py`` of mlcommons/tiny defines it
(``model_name == 'ds_cnn'``; 49 frames x 10 MFCCs x 1 in, 12 labels out): Conv2D 64 of 10x4,
strides (2, 2), ``padding='same'``, BatchNormalization, ReLU, Dropout 0.2; four blocks of
DepthwiseConv2D 3x3 ``'same'``, BatchNormalization, ReLU, Conv2D 64 of 1x1, BatchNormalization,
ReLU; Dropout 0.4; AveragePooling2D of ``(int(49 / 2), int(10 / 2)) = (24, 5)``; Flatten;
Dense 12 with softmax.

Keras's ``'same'`` at stride 2 pads ``(out - 1) * stride + k - in`` in total, the odd one at
the bottom/right: 4 above and 5 below, 1 left and 1 right for the 49x10 input, giving 25x5.
PyTorch's ``Conv2d`` has no such padding, so a ``ZeroPad2d((1, 1, 4, 5))`` comes first. The
reference's pool of 24x5 on the 25x5 map leaves its last row out; so does this one.

Size: 23,756 trainable parameters (22,604 weights and biases, 1,152 BatchNorm scales and
shifts; Keras's ``model.summary()`` of the reference counts 24,908 with the BatchNorm moving
means and variances) and 2,656,768 MACs: the first convolution 320,000, each depthwise 72,000,
each pointwise 409,600, the dense layer 768. MLPerf Tiny quotes the int8 model as 53 KB
(Banbury et al., "MLPerf Tiny Benchmark", NeurIPS 2021 Datasets and Benchmarks).
"""

from .zoo import ZooModel

__all__ = ["KWS_DS_CNN"]

_FILTERS = 64


def _build(torch):
    nn = torch.nn
    layers = [nn.ZeroPad2d((1, 1, 4, 5)), nn.Conv2d(1, _FILTERS, (10, 4), stride=2),
              nn.BatchNorm2d(_FILTERS), nn.ReLU(), nn.Dropout(0.2)]
    for _ in range(4):
        layers += [nn.Conv2d(_FILTERS, _FILTERS, 3, padding=1, groups=_FILTERS),
                   nn.BatchNorm2d(_FILTERS), nn.ReLU(),
                   nn.Conv2d(_FILTERS, _FILTERS, 1), nn.BatchNorm2d(_FILTERS), nn.ReLU()]
    layers += [nn.Dropout(0.4), nn.AvgPool2d((24, 5)), nn.Flatten(), nn.Linear(_FILTERS, 12),
               nn.Softmax(dim=1)]
    return nn.Sequential(*layers)


KWS_DS_CNN = ZooModel(
    name="kws", title="MLPerf Tiny keyword spotting: DS-CNN, 49x10x1 MFCCs, 12 labels",
    input_shape=(49, 10, 1), params=23_756, macs=2_656_768, build_fn=_build)
