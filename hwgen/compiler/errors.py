"""The error of a network that does not fit an accelerator configuration."""

from ..nn.graph import where

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
    name : str or None
        The layer's node name, where the refusal knows it; the message gives it after the
        index unless it is a chain's default name (``"layer 2 ('fc1')"``).
    parts : str or None
        What each layer needs of the resource (``"each layer's weight words: layer 0 512,
        layer 1 96 (608 in all)"``), where the refusal is of a buffer the layers share
        (``hwgen compile`` prints it after the message).
    """

    def __init__(self, message, *, layer=None, resource=None, need=None, limit=None,
                 name=None, parts=None):
        self.layer = layer
        self.resource = resource
        self.need = need
        self.limit = limit
        self.detail = message
        self.name = name
        self.parts = parts
        at = ("network" if layer is None else f"layer {layer}" if name is None
              else where(layer, name))
        super().__init__(f"{at}: {message}")

    def with_hint(self, hint):
        """Return the same error with ``hint`` appended to its message."""
        return CompileError(self.detail + hint, layer=self.layer, resource=self.resource,
                            need=self.need, limit=self.limit, name=self.name,
                            parts=self.parts)

    def named(self, name):
        """Return the same error naming its layer's node ``name`` too."""
        return CompileError(self.detail, layer=self.layer, resource=self.resource,
                            need=self.need, limit=self.limit, name=name, parts=self.parts)
