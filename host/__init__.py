"""The host side of hwgen: talk to a device (a board or the simulated board) over a byte link.

- :class:`Accelerator` (:mod:`host.accelerator`): open a pyserial URL or a transport object,
  check the device, load a compiled program, run inference on any number of rows;
- :class:`AcceleratorPool` (:mod:`host.pool`): several devices sharing the rows of each inference;
- :class:`~host.client.DeviceClient` (:mod:`host.client`): one method per protocol command;
- :mod:`host.plan`: the load/run/read loop of a program as data, and its executors;
- :mod:`host.serve`, :mod:`host.auth`: a board shared on a TCP port, and the shared key that
  guards it beyond this machine;
- :mod:`host.transport`: the :class:`~host.transport.Transport` protocol and the pyserial ports;
- :mod:`host.frames`, :mod:`host.info`: the host's frame decoder and its reading of INFO.

Names are imported on first use, so that ``import host`` (and the ``hwgen`` command line) stays
fast.
"""

import importlib

__all__ = ["Accelerator", "AcceleratorPool", "AuthenticationError", "BusyTimeout",
           "DeviceClient", "DeviceError", "IncompatibleDevice", "InferCounters", "LinkError",
           "LinkTimeout", "NoDeviceLeft", "Transport"]

_WHERE = {
    "Accelerator": "accelerator",
    "AcceleratorPool": "pool",
    "AuthenticationError": "auth",
    "NoDeviceLeft": "pool",
    "IncompatibleDevice": "info",
    "InferCounters": "accelerator",
    "BusyTimeout": "client",
    "DeviceClient": "client",
    "DeviceError": "client",
    "LinkError": "client",
    "LinkTimeout": "client",
    "Transport": "transport",
}


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module 'host' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *__all__])
