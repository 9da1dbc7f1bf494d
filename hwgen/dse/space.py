"""The design space of a sweep: option values, their product, and a stable key per point.

A space maps design fields (the fields of :class:`~hwgen.config.AcceleratorConfig`) to the
values to try; a point takes one value of each, and every field the space leaves out takes the
board's preset (:func:`hwgen.boards.board_config`). On the command line a field's values are a
comma list whose items are single values or ranges:

==================  =====================================================
``8``               one value
``2,4,8``           a list (duplicates dropped, order kept)
``2..8``            every integer from 2 to 8
``2..8:2``          2, 4, 6, 8 (a step)
``64..1024x2``      64, 128, 256, 512, 1024 (a factor)
``all``             ``post_lanes`` only: every column requantized at once (None)
==================  =====================================================

:func:`parse_values` checks the syntax only: a value that :class:`AcceleratorConfig` refuses
(``rows=0``, ``dataflow=xs``) makes a failed point of the sweep, recorded with its reason.
"""

import dataclasses
import hashlib
import itertools
import json
import re

from ..config import AcceleratorConfig

__all__ = ["DEFAULT_SPACE", "FIELDS", "MAX_POINTS", "SpaceError", "parse_values", "point_key",
           "points"]

#: Every design field a space may sweep, in the order of :class:`AcceleratorConfig`.
FIELDS = tuple(f.name for f in dataclasses.fields(AcceleratorConfig))
#: Fields whose values are words, not integers.
_WORD_FIELDS = ("dataflow", "dtype")
#: What a sweep tries when the space names neither ``rows`` nor ``cols``.
DEFAULT_SPACE = {"rows": (2, 4, 8), "cols": (2, 4, 8)}
#: Points a sweep may have; more is almost certainly a typo in a range.
MAX_POINTS = 1_000_000
#: Values one option may expand to.
_MAX_VALUES = 100_000

_RANGE = re.compile(r"^(?P<start>[+-]?\d[\d_]*)\.\.(?P<stop>[+-]?\d[\d_]*)"
                    r"(?:(?P<op>[:x])(?P<by>\d[\d_]*))?$")
_SYNTAX = ("a comma list of integers and ranges START..STOP, START..STOP:STEP or "
           "START..STOPxFACTOR (e.g. 2,4,8 or 2..8:2 or 64..1024x2)")


class SpaceError(ValueError):
    """A malformed value list or space: names the option, the value and what is allowed."""


def _option(field):
    return "--" + field.replace("_", "-")


def _expand(option, item):
    """Return the integers of one list item (a number or a range)."""
    try:
        return [int(item)]
    except ValueError:
        pass
    m = _RANGE.match(item)
    if not m:
        raise SpaceError(f"{option} {item!r}: malformed value; allowed: {_SYNTAX}")
    start, stop = int(m["start"]), int(m["stop"])
    by = int(m["by"]) if m["by"] else 1
    if stop < start:
        raise SpaceError(f"{option} {item!r}: the range ends before it starts; allowed: "
                         f"START..STOP with START <= STOP")
    if m["op"] == "x":
        if by < 2 or start < 1:
            raise SpaceError(f"{option} {item!r}: a factor range needs START >= 1 and "
                             f"FACTOR >= 2")
        values, v = [], start
        while v <= stop:
            values.append(v)
            v *= by
        return values
    if by < 1:
        raise SpaceError(f"{option} {item!r}: the step must be >= 1")
    if (stop - start) // by + 1 > _MAX_VALUES:
        raise SpaceError(f"{option} {item!r}: {(stop - start) // by + 1} values; allowed: at "
                         f"most {_MAX_VALUES} per option")
    return list(range(start, stop + 1, by))


def parse_values(field, text):
    """Return the values of ``field`` that ``text`` lists (see the module's table).

    Parameters
    ----------
    field : str
        A field of :class:`~hwgen.config.AcceleratorConfig`.
    text : str
        A comma list of values and ranges; ``dataflow`` takes words.

    Returns
    -------
    tuple
        The values in the order given, without duplicates: ints, words for ``dataflow``,
        ``None`` for ``post_lanes`` ``all``.

    Raises
    ------
    SpaceError
        Naming the option, the value and the syntax allowed, for an unknown field, an empty
        item or a malformed range.
    """
    if field not in FIELDS:
        raise SpaceError(f"{field!r} is not a design field; allowed: {', '.join(FIELDS)}")
    option = _option(field)
    if not isinstance(text, str) or not text.strip():
        raise SpaceError(f"{option} {text!r}: no values; allowed: {_SYNTAX}")
    values = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            raise SpaceError(f"{option} {text!r}: an empty item; allowed: {_SYNTAX}")
        if field in _WORD_FIELDS:
            values.append(item)
        elif field == "post_lanes" and item == "all":
            values.append(None)
        else:
            values.extend(_expand(option, item))
        if len(values) > _MAX_VALUES:
            raise SpaceError(f"{option} {text!r}: more than {_MAX_VALUES} values")
    return tuple(dict.fromkeys(values))


def _check_space(space):
    """Return ``space`` as ``{field: tuple of values}`` in field order; raise SpaceError."""
    out = {}
    for field, given in space.items():
        if field not in FIELDS:
            raise SpaceError(f"{field!r} is not a design field; allowed: {', '.join(FIELDS)}")
        if isinstance(given, str):
            values = parse_values(field, given)
        elif isinstance(given, list | tuple | range):
            values = given
        else:
            values = (given,)
        if not values:
            raise SpaceError(f"{_option(field)}: no values")
        out[field] = tuple(dict.fromkeys(values))
    return {field: out[field] for field in FIELDS if field in out}


def points(space=None):
    """Return the points of ``space``: one dict of the swept fields per combination.

    Parameters
    ----------
    space : dict, optional
        ``{field: values}``; values a sequence, a single value or a string for
        :func:`parse_values`. ``rows`` and ``cols`` default to :data:`DEFAULT_SPACE` when the
        space names neither.

    Returns
    -------
    list of dict
        In a fixed order: the product of the fields in :class:`AcceleratorConfig` order, the
        last field varying fastest.

    Raises
    ------
    SpaceError
        For an unknown field, an empty value list or more than :data:`MAX_POINTS` points.
    """
    if space is None:
        space = {}
    if not isinstance(space, dict):
        raise SpaceError(f"space must be a dict of design fields to values, not "
                         f"{type(space).__name__}")
    if "rows" not in space and "cols" not in space:
        space = {**DEFAULT_SPACE, **space}
    space = _check_space(space)
    count = 1
    for values in space.values():
        count *= len(values)
    if count > MAX_POINTS:
        sizes = " x ".join(f"{len(v)} {f}" for f, v in space.items())
        raise SpaceError(f"the space has {count:,} points ({sizes}); allowed: at most "
                         f"{MAX_POINTS:,}")
    fields = list(space)
    return [dict(zip(fields, combo, strict=True))
            for combo in itertools.product(*space.values())]


def point_key(*, board, tier, model, baud, seed, config):
    """Return the 16-hex-digit key of a point in ``results.csv``.

    Two points share a key exactly when they would give the same result: the same board,
    tier, model, link rate, placement seed (the build tier only) and configuration.
    ``config`` is the resolved configuration's ``to_dict()``, or for a point that is not a
    valid configuration, the swept values.
    """
    data = {"board": board, "tier": tier, "model": model, "baud": baud,
            "seed": seed if tier == "build" else None, "config": config}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
