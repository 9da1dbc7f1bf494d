"""The MLPerf Tiny visual-wake-words model: MobileNetV1 with width multiplier 0.25.

As ``benchmark/training/visual_wake_words/vww_model.py`` of mlcommons/tiny defines it
(``mobilenet_v1()``; 96x96x3 in, person / no person out): Conv2D 8 of 3x3, stride 2,
``padding='same'``, BatchNormalization, ReLU; 13 depthwise-separable blocks (DepthwiseConv2D
3x3 ``'same'``, BatchNormalization, ReLU, Conv2D 1x1, BatchNormalization, ReLU) whose
pointwise convolutions have 16, 32, 32, 64, 64, 128 x 6, 256, 256 filters and whose depthwise
convolutions have stride 2 in blocks 2, 4, 6 and 12 (96 -> 48 -> 24 -> 12 -> 6 -> 3);
AveragePooling2D over the 3x3 map; Flatten; Dense 2 with softmax. ReLU, not ReLU6: the
reference says so.

Keras's ``'same'`` at stride 2 on an even size pads one pixel, at the bottom and the right; a
``ZeroPad2d((0, 1, 0, 1))`` before each stride-2 convolution does the same in PyTorch.

Size: 216,322 trainable parameters (210,850 weights and biases, 5,472 BatchNorm scales and
shifts; Keras's ``model.summary()`` of the reference counts 221,794 with the moving means and
variances) and 7,489,664 MACs (the first convolution 746,496, the depthwise ones 1,137,024,
the pointwise ones 5,605,632, the dense layer 512). MLPerf Tiny quotes the int8 model as
325 KB (Banbury et al., "MLPerf Tiny Benchmark", NeurIPS 2021 Datasets and Benchmarks).
"""

from .zoo import ZooModel

__all__ = ["VWW_MOBILENET"]

# (output channels of the pointwise convolution, stride of the depthwise one) per block.
_BLOCKS = ((16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1),
           (128, 1), (128, 1), (128, 1), (256, 2), (256, 1))


def _build(torch):
    nn = torch.nn
    channels = 8
    layers = [nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(3, channels, 3, stride=2),
              nn.BatchNorm2d(channels), nn.ReLU()]
    for filters, stride in _BLOCKS:
        if stride == 2:
            layers += [nn.ZeroPad2d((0, 1, 0, 1)),
                       nn.Conv2d(channels, channels, 3, stride=2, groups=channels)]
        else:
            layers.append(nn.Conv2d(channels, channels, 3, padding=1, groups=channels))
        layers += [nn.BatchNorm2d(channels), nn.ReLU(), nn.Conv2d(channels, filters, 1),
                   nn.BatchNorm2d(filters), nn.ReLU()]
        channels = filters
    layers += [nn.AvgPool2d(3), nn.Flatten(), nn.Linear(channels, 2), nn.Softmax(dim=1)]
    return nn.Sequential(*layers)


VWW_MOBILENET = ZooModel(
    name="vww", title="MLPerf Tiny visual wake words: MobileNetV1 0.25, 96x96x3, 2 classes",
    input_shape=(96, 96, 3), params=216_322, macs=7_489_664, build_fn=_build)
