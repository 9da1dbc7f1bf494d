"""Clocks of a board: exact PLL settings, the clock plan of a target clock, the link's usual
clock (the rate decides the UART's: :mod:`hwgen.boards.baud`).

A target clock is either the board's oscillator or a clock the family's PLL makes exactly
(:func:`ice40_pll`, :func:`ecp5_pll`, :func:`gowin_pll`); anything else is a :class:`PLLError`
that lists the nearest clocks the board can make.
"""

from .catalog import Family

__all__ = ["GOWIN_PLL_LIMITS", "PLLError", "clock_plan", "ecp5_pll", "gowin_pll", "ice40_pll",
           "link_clock_hz"]


class PLLError(ValueError):
    """A board cannot make the requested clock exactly."""


def ice40_pll(f_in, f_out):
    """Return iCE40 ``SB_PLL40`` settings that make exactly ``f_out`` from ``f_in``.

    ``f_out = f_in * (DIVF + 1) / ((DIVR + 1) * 2**DIVQ)`` with the phase detector at 10..133 MHz
    and the VCO at 533..1066 MHz (iCE40 sysCLOCK PLL design guide, as ``icepll`` uses them).

    Returns
    -------
    dict
        ``DIVR``, ``DIVF``, ``DIVQ``, ``FILTER_RANGE`` and ``vco_hz``.

    Raises
    ------
    PLLError
        When no setting gives ``f_out`` exactly; the message lists the nearest ones.
    """
    found = []
    for divr in range(16):
        pfd = f_in / (divr + 1)
        if not 10e6 <= pfd <= 133e6:
            continue
        for divf in range(128):
            vco = pfd * (divf + 1)
            if not 533e6 <= vco <= 1066e6:
                continue
            for divq in range(1, 7):
                num, den = f_in * (divf + 1), (divr + 1) << divq
                found.append((num / den, num % den == 0, divr, divf, divq, vco, pfd))
    for hz, exact, divr, divf, divq, vco, pfd in found:
        if exact and int(hz) == f_out:
            filt = next(i + 1 for i, top in enumerate((17e6, 26e6, 44e6, 66e6, 101e6, 1e12))
                        if pfd < top)
            return {"DIVR": divr, "DIVF": divf, "DIVQ": divq, "FILTER_RANGE": filt,
                    "vco_hz": int(vco)}
    raise PLLError(_no_pll_message("iCE40", f_in, f_out, [f[0] for f in found if f[1]]))


def ecp5_pll(f_in, f_out):
    """Return ECP5 ``EHXPLLL`` settings that make exactly ``f_out`` from ``f_in``.

    With ``CLKOP`` as feedback, ``f_out = f_in * CLKFB_DIV / CLKI_DIV`` and the VCO runs at
    ``f_out * CLKOP_DIV``; the phase detector must run at 3.125..400 MHz and the VCO at
    400..800 MHz (as ``ecppll`` uses them).

    Returns
    -------
    dict
        ``CLKI_DIV``, ``CLKFB_DIV``, ``CLKOP_DIV``, ``CLKOP_CPHASE`` and ``vco_hz``.

    Raises
    ------
    PLLError
        When no setting gives ``f_out`` exactly; the message lists the nearest ones.
    """
    reachable = set()
    for clki in range(1, 129):
        pfd = f_in / clki
        if not 3.125e6 <= pfd <= 400e6:
            continue
        for clkfb in range(1, 81):
            out = f_in * clkfb / clki
            for clkop in range(1, 129):
                if not 400e6 <= out * clkop <= 800e6:
                    continue
                if (f_in * clkfb) % clki == 0:
                    reachable.add(f_in * clkfb // clki)
                if f_in * clkfb == f_out * clki:
                    return {"CLKI_DIV": clki, "CLKFB_DIV": clkfb, "CLKOP_DIV": clkop,
                            "CLKOP_CPHASE": clkop - 1, "vco_hz": int(out * clkop)}
    raise PLLError(_no_pll_message("ECP5", f_in, f_out, sorted(reachable)))


#: The rPLL's ranges (Hz) per Gowin chip: phase detector, VCO and output, from Gowin's data
#: sheets (DS117 for the GW1NR-9 at C6/I5, DS226 for the GW2A-18 at C8/I7).
GOWIN_PLL_LIMITS = {
    "GW1N-9C": {"pfd": (3e6, 400e6), "vco": (400e6, 1200e6), "out": (3.125e6, 600e6)},
    "GW2A-18C": {"pfd": (3e6, 500e6), "vco": (500e6, 1250e6), "out": (3.90625e6, 625e6)},
}
# The rPLL's output dividers.
_GOWIN_ODIV = (2, 4, 8, 16, 32, 48, 64, 80, 96, 112, 128)


def gowin_pll(f_in, f_out, chip):
    """Return Gowin ``rPLL`` settings that make exactly ``f_out`` from ``f_in`` on ``chip``
    (a key of :data:`GOWIN_PLL_LIMITS`).

    ``f_out = f_in * (FBDIV_SEL + 1) / (IDIV_SEL + 1)`` and the VCO runs at
    ``f_out * ODIV_SEL``, each within the chip's ranges.

    Returns
    -------
    dict
        ``IDIV_SEL``, ``FBDIV_SEL``, ``ODIV_SEL`` and ``vco_hz``.

    Raises
    ------
    PLLError
        When no setting gives ``f_out`` exactly; the message lists the nearest ones.
    """
    limits = GOWIN_PLL_LIMITS[chip]
    reachable = set()
    for idiv in range(64):
        if not limits["pfd"][0] <= f_in / (idiv + 1) <= limits["pfd"][1]:
            continue
        for fbdiv in range(64):
            out = f_in * (fbdiv + 1) / (idiv + 1)
            odivs = [d for d in _GOWIN_ODIV
                     if limits["vco"][0] <= out * d <= limits["vco"][1]]
            if not odivs or not limits["out"][0] <= out <= limits["out"][1]:
                continue
            if (f_in * (fbdiv + 1)) % (idiv + 1) == 0:
                reachable.add(f_in * (fbdiv + 1) // (idiv + 1))
            if f_in * (fbdiv + 1) == f_out * (idiv + 1):
                return {"IDIV_SEL": idiv, "FBDIV_SEL": fbdiv, "ODIV_SEL": odivs[0],
                        "vco_hz": int(out * odivs[0])}
    raise PLLError(_no_pll_message(f"Gowin {chip}", f_in, f_out, sorted(reachable)))


def _no_pll_message(family, f_in, f_out, reachable):
    near = sorted({int(f) for f in reachable if f == int(f)}, key=lambda f: abs(f - f_out))[:4]
    return (f"the {family} PLL cannot make {f_out / 1e6:g} MHz exactly from the board's "
            f"{f_in / 1e6:g} MHz; nearest exact clocks: "
            + ", ".join(f"{f / 1e6:g} MHz" for f in sorted(near)))


#: The PLL settings function of each family, given the board.
_PLLS = {Family.ICE40: lambda board, hz: ice40_pll(board.osc_hz, hz),
         Family.ECP5: lambda board, hz: ecp5_pll(board.osc_hz, hz),
         Family.GOWIN: lambda board, hz: gowin_pll(board.osc_hz, hz, board.chip)}


def clock_plan(board, clock_hz):
    """Return ``{"source", "hz", "pll"}`` for a target clock on ``board``.

    Raises
    ------
    PLLError
        When the board cannot make ``clock_hz`` exactly.
    """
    if clock_hz == board.osc_hz:
        return {"source": "oscillator", "hz": clock_hz, "pll": None}
    pll = _PLLS[board.family](board, clock_hz)
    return {"source": "pll", "hz": clock_hz, "pll": pll}


def link_clock_hz(board, config):
    """Return the clock of the link's own domain on ``board`` (its oscillator, when the board
    runs the link from it and a PLL makes the design's clock), or None when the link shares
    the design's clock."""
    pll = clock_plan(board, config.clock_hz)["pll"]
    return board.osc_hz if board.implementation.link_on_oscillator and pll is not None else None
