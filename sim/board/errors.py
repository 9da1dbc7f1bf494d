"""The error of a simulated board."""

__all__ = ["BoardError"]


class BoardError(RuntimeError):
    """The simulated board could not be built or started, or it stopped unexpectedly."""
