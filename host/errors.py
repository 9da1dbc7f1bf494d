"""The errors of a host's link to a device: an error status, a link that gives no intact answer
(or none at all), a device that stays busy.

:class:`DeviceError` and :class:`LinkError` name the request they are about; the
:class:`host.client.DeviceClient` raises them, :class:`host.Accelerator` adds the stage of its
work (``infer rows 0..255 of 1000: ...``).
"""

from hwgen.protocol import STATUS_TEXT, Status

__all__ = ["BusyTimeout", "DeviceError", "LinkError", "LinkTimeout"]


class DeviceError(RuntimeError):
    """The device answered a request with an error status.

    Attributes
    ----------
    request : str
        The request, e.g. ``"WRITE ACT[0:16]"``.
    status : Status or int
    """

    def __init__(self, request, status):
        self.request = request
        self.status = status
        if isinstance(status, Status):
            text = f"{status.name} ({STATUS_TEXT[status]})"
        else:
            text = f"unknown status {status:#04x}"
        super().__init__(f"{request} failed: {text}")


class LinkError(OSError):
    """No intact answer to a request after every attempt, or an answer that makes no sense."""


class LinkTimeout(LinkError, TimeoutError):
    """No answer at all to a request after every attempt."""


class BusyTimeout(TimeoutError):
    """The device stayed busy for longer than allowed."""
