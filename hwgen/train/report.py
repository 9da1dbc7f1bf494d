"""What one epoch of a training on the devices did and cost: :class:`EpochReport`."""

import dataclasses

__all__ = ["EpochReport"]


@dataclasses.dataclass(frozen=True)
class EpochReport:
    """The figures of one epoch.

    Attributes
    ----------
    epoch : int
        From 1.
    steps : int
        Minibatches.
    loss : float
        Mean cross-entropy over the epoch's samples, of the network as the devices ran it.
    train_accuracy : float
        Fraction of the epoch's samples the devices classified right in the forward passes
        of the training (with the weights of each step, before its update).
    test_accuracy : float or None
        The quantized network at the end of the epoch, run on the devices over the test data
        (None without test data).
    device_macs : int
        Multiply-accumulates of the training's matrix products run on the devices (forward,
        weight and input gradients).
    host_macs : int
        Those run on the host (the calibration's float forward pass, in the first epoch).
    issued_macs : int
        The devices' MAC counters for the training's products: what the arrays performed,
        padding of partial tiles included.
    cycles : int
        Device cycles of the training's programs, summed over the devices.
    wire_bytes : int
        Bytes on the links for the training, both directions (loads, data, polls).
    eval_macs : int
        Multiply-accumulates of the test inference on the devices (not training work).
    seconds : float
        Wall time of the epoch, test inference included.
    """

    epoch: int
    steps: int
    loss: float
    train_accuracy: float
    test_accuracy: float | None
    device_macs: int
    host_macs: int
    issued_macs: int
    cycles: int
    wire_bytes: int
    eval_macs: int
    seconds: float

    @property
    def device_share(self):
        """``device_macs / (device_macs + host_macs)``: the share of the training's
        multiply-accumulates run on the devices (0 when there were none)."""
        total = self.device_macs + self.host_macs
        return self.device_macs / total if total else 0.0

    def line(self):
        """Return the figures as one line, for people."""
        test = "-" if self.test_accuracy is None else f"{self.test_accuracy:.2%}"
        return (f"epoch {self.epoch:>3}  loss {self.loss:.4f}  train {self.train_accuracy:.2%}"
                f"  test {test}  on devices {self.device_share:.2%} of "
                f"{self.device_macs + self.host_macs:,} MACs  cycles {self.cycles:,}  wire "
                f"{self.wire_bytes / 1e6:.2f} MB  {self.seconds:.1f} s")

    def to_dict(self):
        """Return the figures (and :attr:`device_share`) as plain values."""
        return {**dataclasses.asdict(self), "device_share": self.device_share}
