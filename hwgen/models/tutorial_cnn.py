"""The CNN of the PyTorch and Keras tutorials: Conv-BatchNorm-ReLU-MaxPool twice, Dropout, a
Linear classifier, on a 28x28x1 (MNIST-sized) image.

Conv 8 of 3x3 (padding 1), BatchNorm, ReLU, MaxPool 2x2; Conv 16 of 3x3 (padding 1),
BatchNorm, ReLU, MaxPool 2x2; Dropout 0.25; Flatten; Linear 10. Its channels are fewer than
the tutorials' (16 and 32, or 32 and 64): the classifier reduces over the 7x7x16 map (784
inputs). Wider ones compile too where the WEIGHT memory holds them (16 and 32 channels, a
reduction of 1,568, on the 85F's ResNet-8 and VWW designs: docs/nn.md, "The accumulator
proof").

Size: 9,146 trainable parameters (the convolutions 80 and 1,168, the BatchNorms 16 and 32, the
classifier 7,850) and 290,080 MACs (the convolutions 56,448 and 225,792, the classifier
7,840).
"""

from .zoo import ZooModel

__all__ = ["TUTORIAL_CNN", "build_tutorial_cnn"]


def build_tutorial_cnn(torch, channels=(8, 16)):
    """Return the tutorials' CNN as a PyTorch module with ``channels`` ``(c1, c2)`` in its
    two convolutions (the zoo's: 8 and 16); its classifier reduces over ``7 * 7 * c2``."""
    c1, c2 = channels
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25), nn.Flatten(), nn.Linear(7 * 7 * c2, 10))


TUTORIAL_CNN = ZooModel(
    name="tutorial_cnn", title="Tutorial CNN: Conv-BN-ReLU-MaxPool x2, Dropout, Linear; 28x28x1",
    input_shape=(28, 28, 1), params=9_146, macs=290_080, build_fn=build_tutorial_cnn)
