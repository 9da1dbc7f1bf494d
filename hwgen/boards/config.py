"""The configuration a board builds: its preset, a ``--config`` manifest and the command line's
design options, merged in that order."""

import dataclasses
import json
from pathlib import Path

from ..config import AcceleratorConfig, Dataflow
from . import catalog
from .catalog import BOARDS, PRESET_ALIASES, UNSPLIT_ACT

__all__ = ["board_config", "named_design", "preset_nextpnr", "preset_of", "preset_seed"]


def board_config(board, args=None, *, clock_hz=None, preset=None, **overrides):
    """Return the configuration to build on ``board``.

    The board's preset (or the named preset ``preset`` of
    :data:`~hwgen.boards.catalog.NAMED_PRESETS`, which must be one for ``board``; ``args.preset``
    too), then the fields of a ``--config`` JSON file, then every design option
    given on the command line (``args``, compared with :class:`AcceleratorConfig`'s defaults),
    then ``overrides``. ``clock_hz`` defaults to the board's default clock. In ``args`` a
    design option is given when it is not ``None`` (see ``hwgen build``).

    Raises
    ------
    ValueError
        If the parameters are not a valid configuration.
    """
    preset = preset or getattr(args, "preset", None)
    base = board.preset if preset is None else _named_preset(board, preset)
    values = dict(base)
    defaults = AcceleratorConfig()
    given_fields = set(overrides)
    if args is not None:
        if getattr(args, "config", None):
            data = json.loads(Path(args.config).read_text())
            values.update(data.get("config", data))
            given_fields |= set(data.get("config", data))
        # `hwgen build` leaves every design option at None unless it is given.
        for field in dataclasses.fields(AcceleratorConfig):
            value = getattr(args, field.name, None)
            if value is not None:
                values[field.name] = value
                given_fields.add(field.name)
    values.update(overrides)
    from_preset = values.get("post_lanes") == board.preset.get("post_lanes")
    given = "post_lanes" in overrides or getattr(args, "post_lanes", None) is not None
    if values.get("dataflow") == Dataflow.OS and from_preset and not given:
        # The preset's requantization lanes are for its weight-stationary array.
        values.pop("post_lanes", None)
    _bf16_from_preset(values, given_fields)
    _unsplit_if_needed(values, given_fields)
    _without_depthwise_if_needed(values, given_fields)
    if clock_hz is None:
        clock_hz = overrides.get("clock_hz", getattr(args, "clock_hz", None))
    if clock_hz is None and values.get("clock_hz") == base.get("clock_hz"):
        clock_hz = base.get("clock_hz")   # the preset's own clock (the one it meets)
    if clock_hz is not None:   # given: even when it equals AcceleratorConfig's default
        values["clock_hz"] = clock_hz
    elif "clock_hz" not in values or values["clock_hz"] == defaults.clock_hz:
        # AcceleratorConfig's default clock means nothing on a board: use the board's.
        values["clock_hz"] = board.clock_hz
    return AcceleratorConfig.from_dict(values)


def named_design(name, **overrides):
    """Return ``(board, config)`` of design ``name``: a board's preset, or a named preset of
    :data:`~hwgen.boards.catalog.NAMED_PRESETS` on its board, with ``overrides`` (as
    :func:`board_config` takes them) over it.

    Raises
    ------
    ValueError
        If ``name`` is neither a board nor a named preset (the message lists both), or the
        overrides give no valid configuration.
    """
    if name in BOARDS:
        return BOARDS[name], board_config(BOARDS[name], **overrides)
    if name in catalog.NAMED_PRESETS:
        board = BOARDS[catalog.NAMED_PRESETS[name][0]]
        return board, board_config(board, preset=name, **overrides)
    raise ValueError(f"design {name!r} is neither a board nor a named preset; allowed: boards "
                     + ", ".join(sorted(BOARDS)) + "; presets "
                     + ", ".join(sorted(catalog.NAMED_PRESETS)))


def _bf16_from_preset(values, given):
    """Give a bf16 design what bf16 needs in place of the int8 preset's fields that were not
    ``given`` (its accumulator width, its ReLU without bounds, its requantization lanes, its
    activations in SPRAM, its depthwise unit: the bf16 core runs depthwise layers as grouped
    matrices): ``--dtype bf16`` alone then builds the board's preset in bf16, or
    is refused for the fit, not for a field the user never wrote."""
    if values.get("dtype") != "bf16":
        return
    needs = {"acc_bits": 32, "bounds": True, "post_lanes": None, "depthwise": False}
    values.update({name: value for name, value in needs.items() if name not in given})
    if "act_spram_depth" not in given and values.get("act_spram_depth"):
        values.update({k: v for k, v in UNSPLIT_ACT.items() if k not in given})


def _unsplit_if_needed(values, given):
    """Put a preset's split ACT back into block RAM (:data:`UNSPLIT_ACT`, the fields not
    ``given``) when the design derived from it cannot split it (``act_spram_depth``)."""
    if not values.get("act_spram_depth") or "act_spram_depth" in given:
        return
    try:
        AcceleratorConfig.from_dict({**values, "clock_hz": AcceleratorConfig().clock_hz})
    except ValueError as err:
        if "act_spram_depth" not in str(err):
            return   # refused for another reason, named when the configuration is built
        values.update({k: v for k, v in UNSPLIT_ACT.items() if k not in given})


def _without_depthwise_if_needed(values, given):
    """Leave out a preset's depthwise unit when the design derived from it cannot have one
    (dense only, output-stationary, fewer requantization lanes than columns, more rows than
    columns) and ``depthwise`` was not ``given``: the unit is the preset's choice, not the
    user's."""
    if not values.get("depthwise") or "depthwise" in given:
        return
    try:
        AcceleratorConfig.from_dict({**values, "clock_hz": AcceleratorConfig().clock_hz})
    except ValueError as err:
        if str(err).startswith("depthwise=True needs"):
            values["depthwise"] = False


def _named_preset(board, name):
    """Return the fields of the named preset ``name`` of ``board`` (an alias of
    :data:`~hwgen.boards.catalog.PRESET_ALIASES`: the board's own), or raise ValueError."""
    if BOARDS.get(PRESET_ALIASES.get(name)) is board:
        return board.preset
    # Looked up when called, so that a preset added to the catalog counts.
    ours = sorted(n for n, (b, _) in catalog.NAMED_PRESETS.items() if BOARDS[b] is board)
    if name not in ours:
        raise ValueError(f"preset {name!r} is not one of the board's named presets; allowed: "
                         + (", ".join(ours) if ours else "none for this board"))
    return catalog.NAMED_PRESETS[name][1]


def preset_seed(board, config):
    """Return the nextpnr seed of the preset ``config`` is (at its own clock), from
    :data:`~hwgen.boards.catalog.PRESET_SEEDS`, or None: ``hwgen build`` without ``--seed``
    then places it as its recorded build was placed."""
    return catalog.PRESET_SEEDS.get(_own_preset(board, config))


def preset_nextpnr(board, config):
    """Return the nextpnr placer and router options (flag and value pairs) of the preset
    ``config`` is (at any clock: the same netlist bar the clock's PLL and the UART's divisor),
    from :data:`~hwgen.boards.catalog.PRESET_NEXTPNR`, or None: the flow's choice for its size
    then."""
    options = catalog.PRESET_NEXTPNR.get(preset_of(board, config))
    return None if options is None else list(options)


def _own_preset(board, config):
    """Return the name of the preset ``config`` is at the preset's own clock, or None."""
    name = preset_of(board, config)
    if name is None or board_config(board, preset=None if name == board.name else name) \
            != config:
        return None
    return name


def preset_of(board, config):
    """Return the name of the preset ``config`` is, at whatever clock: ``board.name`` for the
    board's own, a key of :data:`~hwgen.boards.catalog.NAMED_PRESETS` for a named one of the
    board's; None for any other design."""
    named = [name for name, (b, _) in catalog.NAMED_PRESETS.items() if BOARDS[b] is board]
    for name, preset in ((board.name, None), *((n, n) for n in named)):
        if board_config(board, preset=preset, clock_hz=config.clock_hz) == config:
            return name
    return None
