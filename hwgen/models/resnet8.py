"""The MLPerf Tiny image-classification model: ResNet-8 (``resnet_v1_eembc``), a graph: each
stack's forward adds its shortcut to its second convolution's output, which
``hwgen.nn.from_torch`` traces into :class:`hwgen.nn.Node`s with an ``Add`` each (the ReLU after
it folded into the add). The 85F design that runs it is the named preset
``ulx3s-85f-resnet8`` (:data:`hwgen.boards.catalog.NAMED_PRESETS`).

As ``benchmark/training/image_classification/keras_model.py`` of mlcommons/tiny defines it,
with the 16 first-stage filters of its pretrained model (the newest revision makes the count an
argument, ``conv_filters``, with 26 as default): on a 32x32x3 image, Conv 16 of 3x3 ``'same'``,
BatchNorm, ReLU; three stacks of two 3x3 convolutions (16, 32, 64 filters; the second and
third stacks start with stride 2 and add a 1x1 stride-2 convolution on the shortcut), each
ending in an addition and a ReLU; AveragePooling2D over the 8x8 map; Flatten; Dense 10 with
softmax. Keras's ``'same'`` at stride 2 on an even size pads one pixel at the bottom and the
right (a ``ZeroPad2d((0, 1, 0, 1))`` here); a 1x1 stride-2 convolution needs none.

Size: 78,186 trainable parameters (77,706 weights and biases, 480 BatchNorm scales and shifts;
Keras's ``model.summary()`` counts 78,666 with the moving statistics) and 12,501,632 MACs.
MLPerf Tiny quotes the int8 model as 96 KB (Banbury et al., "MLPerf Tiny
Benchmark", NeurIPS 2021 Datasets and Benchmarks).
"""

from .zoo import ZooModel

__all__ = ["RESNET8"]


def _build(torch, filters=16):
    nn = torch.nn

    def conv_bn(c_in, c_out, stride):
        pad = nn.ZeroPad2d((0, 1, 0, 1)) if stride == 2 else nn.Identity()
        return nn.Sequential(pad, nn.Conv2d(c_in, c_out, 3, stride=stride,
                                            padding=1 if stride == 1 else 0),
                             nn.BatchNorm2d(c_out))

    class Stack(nn.Module):
        def __init__(self, c_in, c_out, stride):
            super().__init__()
            self.first = nn.Sequential(conv_bn(c_in, c_out, stride), nn.ReLU())
            self.second = conv_bn(c_out, c_out, 1)
            self.shortcut = (nn.Identity() if stride == 1
                             else nn.Conv2d(c_in, c_out, 1, stride=stride))

        def forward(self, x):
            return torch.relu(self.shortcut(x) + self.second(self.first(x)))

    class ResNet8(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(conv_bn(3, filters, 1), nn.ReLU())
            self.stacks = nn.Sequential(Stack(filters, filters, 1),
                                        Stack(filters, 2 * filters, 2),
                                        Stack(2 * filters, 4 * filters, 2))
            self.head = nn.Sequential(nn.AvgPool2d(8), nn.Flatten(),
                                      nn.Linear(4 * filters, 10), nn.Softmax(dim=1))

        def forward(self, x):
            return self.head(self.stacks(self.stem(x)))

    return ResNet8()


RESNET8 = ZooModel(
    name="resnet8", title="MLPerf Tiny image classification: ResNet-8, 32x32x3, 10 classes",
    input_shape=(32, 32, 3), params=78_186, macs=12_501_632, build_fn=_build, graph=True)
