"""LeNet-5 with average pooling (LeCun, Bottou, Bengio and Haffner, "Gradient-based learning
applied to document recognition", Proc. IEEE 86(11), 1998).

On a 32x32x1 image: C1 Conv 6 of 5x5, S2 average pooling 2x2, C3 Conv 16 of 5x5, S4 average
pooling 2x2, C5 120 (a 5x5 convolution over the 5x5 map, so a Linear of 400), F6 84, output
10; ReLU after C1, C3, C5 and F6 (the paper's scaled tanh is not a layer the device computes).
Two departures from the paper, as in every modern rendition: C3 connects to all six maps (the
paper's connection table leaves 1,516 of these 2,416 parameters), and S2/S4 average without
the paper's trainable coefficient and bias.

Size: 61,706 parameters: the paper's C1 (156), C5 (48,120) and F6 (10,164) exactly, C3 2,416,
and 850 for a plain linear output layer instead of the paper's RBF units; 416,520 MACs (C1
117,600, C3 240,000, C5 48,000, F6 10,080, output 840).
"""

from .zoo import ZooModel

__all__ = ["LENET5"]


def _build(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 6, 5), nn.ReLU(), nn.AvgPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))


LENET5 = ZooModel(
    name="lenet5", title="LeNet-5 (average pooling, ReLU), 32x32x1, 10 classes",
    input_shape=(32, 32, 1), params=61_706, macs=416_520, build_fn=_build)
