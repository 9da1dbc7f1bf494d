"""Element positions in the activation banks, kept as ``(word, lane)`` pairs.

Element ``k`` of a row lies in bank ``k % lanes``, word ``k // lanes`` of the row; keeping the
pair instead of ``k`` needs no division in hardware.
"""

__all__ = ["advance"]


def advance(m, word, rem, step, lanes, *, frm=None, domain="sync"):
    """Add ``step`` to the element position ``word * lanes + rem``, registered (or, with
    ``domain="comb"``, as the next values of registers).

    ``frm``, a ``(word, rem)`` pair of values, is the position to advance from, if not
    ``(word, rem)``. A ``step`` above ``lanes`` (an output tile of ``cols`` channels over
    fewer banks) moves on ``step // lanes`` whole words besides.
    """
    d = getattr(m.d, domain)
    src_word, src_rem = (word, rem) if frm is None else frm
    words, step = divmod(step, lanes)
    if not step:
        d += word.eq(src_word + words)
        if frm is not None:
            d += rem.eq(src_rem)
        return
    with m.If(src_rem + step >= lanes):
        d += [rem.eq(src_rem + step - lanes), word.eq(src_word + (words + 1))]
    with m.Else():
        d += rem.eq(src_rem + step)
        if words:
            d += word.eq(src_word + words)
        elif frm is not None:
            d += word.eq(src_word)
