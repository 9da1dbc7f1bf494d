"""Sweeps whose two axes are independent: the default run takes each case once and each
variant at least once, the rest of the product runs with ``-m slow``."""

import itertools

import pytest


def each_once(cases, variants):
    """Return ``pytest.param(case, variant)`` for every pair of ``cases`` and ``variants``:
    by default the i-th case with the i-th variant (cycling), the other pairs marked slow.

    For a test whose variant (an output format, say) goes through code that does not depend
    on the case (a layer's geometry): each geometry and each format still run by default.
    """
    cases, variants = list(cases), list(variants)
    if len(cases) < len(variants):
        raise ValueError(f"{len(cases)} cases cannot take each of {len(variants)} variants")
    default = {(case, variants[i % len(variants)]) for i, case in enumerate(cases)}
    return [pytest.param(case, variant, id=f"{case}-{variant}",
                         marks=[] if (case, variant) in default else [pytest.mark.slow])
            for case, variant in itertools.product(cases, variants)]
