"""The error of a network that does not fit an accelerator configuration."""

__all__ = ["CompileError"]


class CompileError(ValueError):
    """A network does not fit an accelerator configuration.

    Attributes
    ----------
    layer : int or None
        Index of the layer concerned, ``None`` for the network as a whole.
    resource : str
        What does not fit, e.g. ``"weight_depth"`` or ``"acc_bits"``.
    need, limit : int
        What the network needs and what the configuration allows.
    """

    def __init__(self, message, *, layer=None, resource=None, need=None, limit=None):
        self.layer = layer
        self.resource = resource
        self.need = need
        self.limit = limit
        self.detail = message
        where = "network" if layer is None else f"layer {layer}"
        super().__init__(f"{where}: {message}")

    def with_hint(self, hint):
        """Return the same error with ``hint`` appended to its message."""
        return CompileError(self.detail + hint, layer=self.layer, resource=self.resource,
                            need=self.need, limit=self.limit)
