"""The epoch's figures (hwgen.train.report)."""

from hwgen.train import EpochReport


def report(**changes):
    fields = {"epoch": 1, "steps": 3, "loss": 0.5, "train_accuracy": 0.75, "test_accuracy": 0.8,
              "device_macs": 990, "host_macs": 10, "issued_macs": 1200, "cycles": 321,
              "wire_bytes": 2_500_000, "eval_macs": 50, "seconds": 1.25}
    return EpochReport(**{**fields, **changes})


def test_device_share_counts_host_work():
    assert report().device_share == 990 / 1000
    assert report(device_macs=0, host_macs=0).device_share == 0.0


def test_line_names_the_figures():
    line = report().line()
    for fragment in ("epoch   1", "loss 0.5000", "train 75.00%", "test 80.00%",
                     "on devices 99.00% of 1,000 MACs", "cycles 321", "wire 2.50 MB", "1.2 s"):
        assert fragment in line, line
    assert "test -" in report(test_accuracy=None).line()


def test_to_dict_has_the_share():
    d = report().to_dict()
    assert d["device_share"] == 0.99 and d["epoch"] == 1
