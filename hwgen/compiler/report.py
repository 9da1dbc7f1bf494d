"""The summary of a compiled program, for people: its layers and its memory use."""

from ..memmap import regions
from .images import IMAGE_REGIONS

__all__ = ["summary"]


def summary(program):
    """Return a short table of the layers and the memory use of ``program``."""
    c = program.config
    lines = [f"program for {c.name} (config {program.config_hash}), batch {program.batch}",
             f"{'layer':>5} {'K':>6} {'N':>6} {'k_tiles':>7} {'n_tiles':>7} "
             f"{'activation':<10} {'output':<7} {'weights':>7} {'params':>6}"]
    for index, layer in enumerate(program.layers):
        activation = "-" if layer.output == "raw" else layer.activation
        lines.append(f"{index:>5} {layer.k:>6} {layer.n:>6} {layer.k_tiles:>7} "
                     f"{layer.n_tiles:>7} {activation:<10} {layer.output:<7} "
                     f"{layer.w_words:>7} {layer.p_words:>6}")
    geometry = regions(c)
    used = ", ".join(f"{r.name} {len(program.images[r][1])}/{geometry[r].depth}"
                     for r in IMAGE_REGIONS)
    useful = 100 * program.macs_per_row / program.padded_macs_per_row
    lines += [f"words used: {used}",
              f"input: ACT[{program.input.base}] stride {program.input.stride}; output: "
              f"{program.output.region.name}[{program.output.base}] stride "
              f"{program.output.stride} ({program.output.kind})"
              + (", every layer's output kept (read-out)" if program.layer_outputs else ""),
              f"MACs per row: {program.macs_per_row} useful of {program.padded_macs_per_row} "
              f"issued ({useful:.1f} %)"]
    return "\n".join(lines)
