"""Layer descriptors: the words of the PROGRAM region, one per layer.

Their fields and widths come from :func:`hwgen.memmap.descriptor_layout` for the configuration;
here they are packed into words, read back, and guarded against their bounds.
"""

from ..memmap import descriptor_layout, descriptor_limits
from .errors import CompileError

__all__ = ["check_field", "descriptor_fields", "pack_descriptor", "unpack_descriptor"]


def descriptor_fields(config):
    """Return ``[(name, offset, width)]`` of :func:`~hwgen.memmap.descriptor_layout`."""
    return [(name, field.offset, field.width) for name, field in descriptor_layout(config)]


def pack_descriptor(config, values):
    """Return the PROGRAM word of the descriptor ``{field: value}``."""
    return descriptor_layout(config).const(values).as_value().value


def unpack_descriptor(config, word):
    """Return ``{field: value}`` of the PROGRAM word ``word``, in the layout's order."""
    return {name: (word >> offset) & ((1 << width) - 1)
            for name, offset, width in descriptor_fields(config)}


def check_field(config, index, name, value):
    """Raise :class:`CompileError` if field ``name`` of layer ``index`` exceeds its bound."""
    # The checks before packing imply every bound; this one guards descriptor_limits itself.
    limit = descriptor_limits(config).get(name, 1)
    if value > limit:
        raise CompileError(f"descriptor field {name}={value} exceeds its bound; limit {limit} "
                           "(hwgen.memmap.descriptor_limits)", layer=index, resource=name,
                           need=value, limit=limit)
