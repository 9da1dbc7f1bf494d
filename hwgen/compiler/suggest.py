"""Which design would hold a network that does not fit: what a fit refusal ends with.

When :func:`hwgen.compile` refuses a network because a buffer or limit of the design is too
small (:data:`FIT_RESOURCES`), the error also says what would hold it: this design with each
short field raised to the network's need (grown field by field, as each next refusal names
the next), with the boards on which the fit estimate (:func:`hwgen.boards.estimate`) puts
that design, and every board preset (:data:`hwgen.boards.catalog.NAMED_PRESETS` too) that
compiles the network as it is.
"""

import dataclasses

from .errors import CompileError

__all__ = ["FIT_RESOURCES", "holding_designs"]

#: The refusals a larger design can cure: each is a configuration field of that name.
FIT_RESOURCES = ("weight_depth", "param_depth", "act_depth", "out_depth", "prog_depth",
                 "max_k", "spatial", "residual")
# Refusals followed at most: WEIGHT and PARAM refuse at the first layer past their depth, so a
# deep network grows them a layer at a time.
_GROWTH_STEPS = 64


def _grown(config, error):
    """Return ``config`` with the field ``error`` names raised to its need, or ``None`` when
    that is not a valid configuration."""
    if error.resource in ("spatial", "residual"):   # a part of the device, added
        values = {error.resource: True}
    else:
        values = {error.resource: max(error.need, getattr(config, error.resource))}
    try:
        return dataclasses.replace(config, **values)
    except ValueError as err:
        if "act_spram_depth" not in str(err):
            return None
    # A split ACT (act_spram_depth) that the grown design cannot keep: all in block RAM.
    try:
        return dataclasses.replace(config, **values, act_spram_depth=0)
    except ValueError:
        return None


def _grow(compile_fn, network, config, error):
    """Return the design that compiles ``network``, grown from ``config`` one refusal at a time,
    and the fields it changed; ``(None, fields)`` if a refusal is not a fit or the growth ends
    in an invalid configuration."""
    grown, changed = config, {}
    for _ in range(_GROWTH_STEPS):
        if error.resource not in FIT_RESOURCES:
            return None, changed
        grown = _grown(grown, error)
        if grown is None:
            return None, changed
        changed[error.resource] = getattr(grown, error.resource)
        if grown.act_spram_depth != config.act_spram_depth:
            changed["act_spram_depth"] = grown.act_spram_depth
        try:
            compile_fn(network, grown)
        except CompileError as again:
            error = again
        else:
            return grown, changed
    return None, changed


def _boards_holding(config):
    """Return ``[(board, estimate)]`` of the boards whose capacity the fit estimate of
    ``config`` (at each board's own clock) stays within."""
    from ..boards.catalog import BOARDS
    from ..boards.fit import FitError, check_fit

    fits = []
    for board in BOARDS.values():
        try:
            fits.append((board, check_fit(board, dataclasses.replace(
                config, clock_hz=board.clock_hz))))
        except (FitError, ValueError):
            continue
    return fits


def _presets_holding(compile_fn, network):
    """Return the names of the board presets that compile ``network`` and that the fit
    estimate puts on their board."""
    from ..boards.catalog import BOARDS, NAMED_PRESETS
    from ..boards.config import board_config
    from ..boards.fit import FitError, check_fit

    designs = [(name, board, None) for name, board in BOARDS.items()]
    designs += [(name, BOARDS[board], name) for name, (board, _) in NAMED_PRESETS.items()]
    names = []
    for name, board, preset in designs:
        try:
            config = board_config(board, preset=preset)
            compile_fn(network, config)
            check_fit(board, config)
        except (CompileError, FitError, ValueError):
            continue
        names.append(name)
    return names


def holding_designs(compile_fn, network, config, error):
    """Return the sentence that says which designs would hold ``network``, which ``config``
    refused with ``error``, or ``""`` when ``error`` is not a fit refusal.

    ``compile_fn(network, config)`` compiles without this suggestion (at the caller's batch),
    raising :class:`CompileError`.
    """
    from ..boards.fit import RESOURCE_NAMES

    if error.resource not in FIT_RESOURCES:
        return ""
    grown, changed = _grow(compile_fn, network, config, error)
    presets = _presets_holding(compile_fn, network)
    parts = []
    if grown is not None:
        *others, last = (f"{name}={value}" for name, value in changed.items())
        fields = f"{', '.join(others)} and {last}" if others else last
        boards = _boards_holding(grown)
        if boards:
            board, est = boards[0]
            names = RESOURCE_NAMES[board.family]
            where = (f", which the fit estimate puts on the {board.name} ({est['bram']} of "
                     f"{board.capacity['bram']} {names['bram']}, {est['dsp']} of "
                     f"{board.capacity['dsp']} {names['dsp']})")
        else:
            where = ", which the fit estimate puts on no board"
        parts.append(f"this design with {fields}{where}")
    if presets:
        parts.append("the preset" + ("s" if len(presets) > 1 else "") + " of "
                     + ", ".join(presets))
    if not parts:
        return "; no board preset holds it, nor this design with larger buffers"
    return "; it would fit " + ", or ".join(parts)
