"""Layer descriptors: the words of the PROGRAM region, one per layer (and a spatial layer's
geometry words after its descriptor).

Their fields and widths come from :func:`hwgen.memmap.descriptor_layout` for the configuration;
here they are packed into words, read back, and guarded against their bounds.
"""

from amaranth.hdl import Shape

from ..memmap import (
    DESCRIPTOR_BOUNDS,
    PassKind,
    descriptor_layout,
    descriptor_limits,
    geometry_layout,
    geometry_words,
)
from .errors import CompileError

__all__ = ["activation_fields", "check_field", "descriptor_fields", "field_values",
           "geometry_fields",
           "pack_descriptor", "pack_layer", "unpack_descriptor", "unpack_program"]


#: The largest value of each field that holds an enum.
_ENUM_LIMITS = {"kind": max(kind.value for kind in PassKind)}


def descriptor_fields(config):
    """Return ``[(name, offset, width)]`` of :func:`~hwgen.memmap.descriptor_layout`."""
    return [(name, field.offset, field.width) for name, field in descriptor_layout(config)]


def pack_descriptor(config, values):
    """Return the PROGRAM word of the descriptor ``{field: value}``."""
    return descriptor_layout(config).const(values).as_value().value


def unpack_descriptor(config, word):
    """Return ``{field: value}`` of the PROGRAM word ``word``, in the layout's order (a signed
    field's value signed)."""
    return field_values(descriptor_layout(config), word)


def field_values(layout, bits):
    """Return ``{field: value}`` of the ``bits`` of a :class:`~amaranth.lib.data.StructLayout`
    (an int), each field's value signed if its shape is."""
    values = {}
    for name, field in layout:
        value = (bits >> field.offset) & ((1 << field.width) - 1)
        if Shape.cast(field.shape).signed and value >> (field.width - 1):
            value -= 1 << field.width
        values[name] = value
    return values


def activation_fields(config, index, leaky, act_min, act_max):
    """Return the descriptor fields of layer ``index``'s activation: ``leaky``, ``act_min``,
    ``act_max`` on a design with ``bounds``; on one without, the ``relu`` flag that stands for
    them.

    Raises
    ------
    CompileError
        If the design has no ``bounds`` and the layer is leaky or its bounds are neither the
        saturation range nor ReLU's.
    """
    low, high = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    if config.bounds:
        return {"leaky": leaky, "act_min": act_min, "act_max": act_max}
    if not leaky and act_max == high and act_min in (low, 0):
        return {"relu": int(act_min == 0)}
    what = "leaky ReLU" if leaky else f"activation bounds [{act_min}, {act_max}]"
    raise CompileError(f"{what}: the design has no bounds (bounds=False) and runs ReLU and "
                       f"identity only (bounds [0, {high}] or [{low}, {high}]); allowed: a "
                       "design with AcceleratorConfig(bounds=True)", layer=index,
                       resource="bounds", need=1, limit=0)


def check_field(config, index, name, value):
    """Raise :class:`CompileError` if field ``name`` of layer ``index`` exceeds its bound."""
    # The checks before packing imply every bound; this one guards descriptor_limits itself.
    if name in DESCRIPTOR_BOUNDS and config.dtype == "bf16":   # bf16 bit patterns
        low, limit = 0, 0xFFFF
    elif name in DESCRIPTOR_BOUNDS:   # signed in_bits
        low, limit = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    else:
        low, limit = 0, {**_ENUM_LIMITS, **descriptor_limits(config)}.get(name, 1)  # a flag: 1
    if not low <= value <= limit:
        raise CompileError(f"descriptor field {name}={value} exceeds its bounds; allowed: "
                           f"{low}..{limit} (hwgen.memmap.descriptor_layout)", layer=index,
                           resource=name, need=value, limit=limit)


def geometry_fields(config):
    """Return ``[(name, offset, width)]`` of :func:`~hwgen.memmap.geometry_layout`."""
    return [(name, field.offset, field.width) for name, field in geometry_layout(config)]


def pack_layer(config, fields):
    """Return the PROGRAM words of one layer: its descriptor, then, for a spatial layer, its
    ``fields["geometry"]`` cut into :func:`~hwgen.memmap.geometry_words` words of the
    descriptor's width."""
    words = [pack_descriptor(config, {k: v for k, v in fields.items() if k != "geometry"})]
    if fields.get("spatial"):
        bits = geometry_layout(config).const(fields["geometry"]).as_value().value
        width = descriptor_layout(config).size
        words += [(bits >> (i * width)) & ((1 << width) - 1)
                  for i in range(geometry_words(config))]
    return words


def unpack_program(config, words):
    """Return the layers' fields (:func:`pack_layer`'s input) of the PROGRAM words ``words``.

    Raises
    ------
    ValueError
        If a spatial layer's geometry words are missing.
    """
    width = descriptor_layout(config).size
    count = geometry_words(config)
    layers, i = [], 0
    while i < len(words):
        fields = unpack_descriptor(config, words[i])
        i += 1
        if fields["spatial"]:
            if i + count > len(words):
                raise ValueError(f"PROGRAM word {i - 1} is a spatial layer without its "
                                 f"{count} geometry words")
            bits = sum(words[i + j] << (j * width) for j in range(count))
            fields["geometry"] = {name: (bits >> offset) & ((1 << w) - 1)
                                  for name, offset, w in geometry_fields(config)}
            i += count
        layers.append(fields)
    return tuple(layers)
