"""Payloads that travel between the accelerator's blocks, as ``data`` layouts."""

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from ..memmap import descriptor_layout, fuses_pool, param_lane_layout

__all__ = ["acc_row_layout", "dw_lines_layout", "dw_sel_layout", "lane_position_layout",
           "param_row_layout", "position_layout", "sel_bits", "step_layout",
           "summed_row_layout"]


def acc_row_layout(config):
    """One row of ``cols`` accumulators (signed ``acc_bits``)."""
    return data.ArrayLayout(signed(config.acc_bits), config.cols)


def param_row_layout(config):
    """One parameter word: the bias, multipliers and shift of ``cols`` channels."""
    return data.ArrayLayout(param_lane_layout(config), config.cols)


def position_layout(config):
    """Where a result row goes, as it travels from the accumulators to the write-back.

    nt, n0
        Its output tile and that tile's first channel (``nt * cols``).
    oword, orem
        The activation word and bank of channel ``n0`` (``n0 // lanes``, ``n0 % lanes``).
    dst
        The output row's first word (``dst_base + m * dst_stride``; with a fused pool, the
        pooled pixel's).
    wfirst, wlast
        Only on a design that fuses pools (:func:`~hwgen.memmap.fuses_pool`): the row is its
        pool window's first, last (both for a row without a fused pool).
    """
    nt = descriptor_layout(config).members["n_tiles"]
    return data.StructLayout({
        "nt": nt,
        "n0": range((1 << nt.width) * config.cols),
        "oword": range(config.act_depth * 2),
        "orem": range(config.act_lanes),
        "dst": range(config.act_depth + config.out_depth + 1),
        **_window_flags(config),
    })


def _window_flags(config):
    """The ``wfirst``, ``wlast`` fields of a design that fuses pools (none otherwise)."""
    return {"wfirst": 1, "wlast": 1} if fuses_pool(config) else {}


def lane_position_layout(config, addr_width):
    """Where a requantization step's lanes go in the activation banks.

    base
        The word of the step's first channel (``dst + oword``; addresses wrap alike).
    rem
        That channel's bank.
    ok
        Which of the ``requant_lanes`` channels exist (``< n``).
    wfirst, wlast
        As in :func:`position_layout`: the step's row is its pool window's first, last.
    """
    return data.StructLayout({
        "base": addr_width,
        "rem": range(config.act_lanes),
        "ok": config.requant_lanes,
        **_window_flags(config),
    })


def summed_row_layout(config):
    """A row of the accumulator bank, as it goes to the post-processing.

    final
        The row is of its output tile's last reduction tile: ``sum`` is the finished sum.
    end
        ... and the chunk's last row.
    sum
        The row's ``cols`` sums (:func:`acc_row_layout`).
    pos
        Where the row goes (:func:`position_layout`).
    """
    return data.StructLayout({
        "final": 1,
        "end": 1,
        "sum": acc_row_layout(config),
        "pos": position_layout(config),
    })


def step_layout(config, addr_width):
    """A requantized step, as it goes from the post-processing to the write-back.

    end
        The layer's (or chunk's) last step.
    y
        The step's ``requant_lanes`` requantized channels.
    pos
        Where they go (:func:`lane_position_layout`).
    """
    return data.StructLayout({
        "end": 1,
        "y": data.ArrayLayout(signed(config.in_bits), config.requant_lanes),
        "pos": lane_position_layout(config, addr_width),
    })


def sel_bits(config):
    """Return the width of an array row's line select in a depthwise pass: ``0 ..
    dw_lines`` a delay line, ``dw_lines + 1`` zero (a row past the kernel)."""
    return (config.dw_lines + 1).bit_length()


def dw_lines_layout(config):
    """The depthwise unit's delay lines as the array takes them: ``dw_lines + 1`` words of
    ``cols`` signed ``in_bits`` lanes."""
    word = data.ArrayLayout(signed(config.in_bits), config.cols)
    return data.ArrayLayout(word, config.dw_lines + 1)


def dw_sel_layout(config):
    """The line of each of the array's ``array_rows`` rows in a depthwise pass
    (:func:`sel_bits`)."""
    return data.ArrayLayout(unsigned(sel_bits(config)), config.array_rows)
