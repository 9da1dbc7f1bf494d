"""The devices a training runs on: checked once, each driven from its own thread, its work
counted.

:class:`DeviceGroup` takes what the caller opened (``host.Accelerator`` s, a
``host.AcceleratorPool``, or anything with ``load(program)``, ``infer(x, outputs=...)`` and
``counters()``); :mod:`hwgen.train` never opens a device itself. Work is split by shards of
rows: shard ``d`` of a batch goes to device ``d``, so that the integer results do not depend on
how fast each device is, and a training on N devices gives the same numbers as on one.
"""

import dataclasses
import itertools
import threading

from ..config import AcceleratorConfig
from ..fanout import device_name, fan_out, first_error

__all__ = ["DeviceGroup", "DeviceUsage"]

# What a device must offer: the methods of host.Accelerator that training uses.
_METHODS = ("load", "infer", "counters")


@dataclasses.dataclass
class DeviceUsage:
    """Work done on the devices, summed over the devices and the calls.

    Attributes
    ----------
    useful_macs : int
        Multiply-accumulates of the matrix products asked for (``rows * K * N`` of every
        program run), the work that counts towards the training.
    issued_macs : int
        The devices' own MAC counters: what the arrays performed, padding of partial tiles
        included (so at least ``useful_macs``).
    cycles : int
        Device cycles during which a program was running, summed over the devices.
    wire_bytes : int
        Bytes on the links in both directions: program loads, inputs, outputs, polls.
    runs : int
        RUN requests.
    """

    useful_macs: int = 0
    issued_macs: int = 0
    cycles: int = 0
    wire_bytes: int = 0
    runs: int = 0

    def add(self, other):
        """Add ``other``'s figures to these."""
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def copy(self):
        """Return a copy."""
        return dataclasses.replace(self)

    def minus(self, earlier):
        """Return the figures since ``earlier`` (a copy taken before)."""
        return DeviceUsage(**{f.name: getattr(self, f.name) - getattr(earlier, f.name)
                              for f in dataclasses.fields(self)})


def _devices_of(devices):
    """Return the list of devices in ``devices`` (a list, or a pool with ``.devices``)."""
    inner = getattr(devices, "devices", None)
    if inner is not None and not callable(inner):
        return list(inner)
    if isinstance(devices, str) or all(hasattr(devices, m) for m in _METHODS):
        raise TypeError(f"devices is one {type(devices).__name__}; allowed: a list of devices "
                        "(host.Accelerator s) or a host.AcceleratorPool (write [device] for one)")
    try:
        return list(devices)
    except TypeError:
        raise TypeError(f"devices is a {type(devices).__name__}; allowed: a list of devices "
                        "(host.Accelerator s) or a host.AcceleratorPool") from None


class DeviceGroup:
    """The devices of one training, all built from one configuration.

    Parameters
    ----------
    devices : sequence of device, or a pool
        Open devices: ``host.Accelerator`` s, or a ``host.AcceleratorPool`` (its devices are
        used one by one), or any objects with ``load``, ``infer`` and ``counters`` as
        ``host.Accelerator`` has them. At least one; none twice.
    config : AcceleratorConfig
        The configuration every device was built from. A device that reports a
        ``config_hash`` (as ``host.Accelerator`` does) must report ``config.hash``.

    Attributes
    ----------
    devices : list
    config : AcceleratorConfig
    usage : DeviceUsage
        Everything done on the devices through this group so far.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`AcceleratorConfig`, ``devices`` is a single device or
        not a sequence, or a device lacks one of ``load``, ``infer``, ``counters``.
    ValueError
        If there is no device, a device appears twice, or a device was built from another
        configuration (naming it, its hash and the expected one).
    """

    def __init__(self, devices, config):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config is a {type(config).__name__}; allowed: "
                            "hwgen.AcceleratorConfig")
        devices = _devices_of(devices)
        if not devices:
            raise ValueError("training needs at least one device; got none (an empty list, or "
                             "a pool whose devices were all dropped)")
        for index, device in enumerate(devices):
            missing = [m for m in _METHODS if not callable(getattr(device, m, None))]
            if missing:
                raise TypeError(f"devices[{index}] is a {type(device).__name__} without "
                                f"{', '.join(missing)}; allowed: objects with load(program), "
                                "infer(x, outputs=...) and counters(), e.g. host.Accelerator")
            if any(device is other for other in devices[:index]):
                raise ValueError(f"devices[{index}] ({device_name(device, index)}) is in the "
                                 "list twice; each device may appear once")
            found = getattr(device, "config_hash", None)
            if found is not None and found != config.hash:
                raise ValueError(f"{device_name(device, index)} was built from config hash "
                                 f"{found}, not from {config.name} (config hash "
                                 f"{config.hash}); all devices of a training must be built "
                                 "from its configuration")
        self.devices = devices
        self.config = config
        self.usage = DeviceUsage()
        self._lock = threading.Lock()

    def __len__(self):
        return len(self.devices)

    def shards(self, rows):
        """Return ``[(start, stop)]``: the rows of device ``d`` in a batch of ``rows``.

        Contiguous, in device order, sizes differing by at most one (the first devices take
        the extra rows); a device gets an empty shard when there are fewer rows than devices.
        """
        base, extra = divmod(int(rows), len(self.devices))
        bounds = [0]
        for index in range(len(self.devices)):
            bounds.append(bounds[-1] + base + (index < extra))
        return list(itertools.pairwise(bounds))

    def each(self, work):
        """Call ``work(index, device)`` for every device, each in its own thread
        (:func:`hwgen.fanout.fan_out`, the pool's fan-out too); return the results in device
        order.

        Raises
        ------
        Exception
            The first device's error (by device order), with a note naming the device.
        """
        results, errors = fan_out(work, self.devices, prefix="train")
        error = first_error(errors, self.devices)
        if error is not None:
            raise error
        return results

    def run(self, device, program, x, *, outputs="last"):
        """Load ``program`` on ``device``, run it on ``x`` and count the work; return what
        ``device.infer(x, outputs=outputs)`` returns."""
        before = _wire_bytes(device)
        device.load(program)
        result = device.infer(x, outputs=outputs)
        counters = device.counters()
        after = _wire_bytes(device)
        if before is None or after is None:
            wire = getattr(counters, "wire_bytes", 0)  # the infer's bytes only
        else:
            wire = after - before
        usage = DeviceUsage(useful_macs=program.macs_per_row * len(x),
                            issued_macs=int(getattr(counters, "macs", 0)),
                            cycles=int(getattr(counters, "cycles", 0)), wire_bytes=int(wire),
                            runs=int(getattr(counters, "runs", 0)))
        with self._lock:
            self.usage.add(usage)
        return result


def _wire_bytes(device):
    sent = getattr(device, "bytes_sent", None)
    received = getattr(device, "bytes_received", None)
    if isinstance(sent, int) and isinstance(received, int):
        return sent + received
    return None
