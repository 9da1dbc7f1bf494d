"""A pass on Yosys's JSON netlist: the flip-flops after a DP16KD's read port move into the
block's own output register.

Yosys maps every memory onto DP16KD blocks without their output register (``REGMODE NOREG``),
and an unregistered DP16KD output takes most of a clock cycle in nextpnr's timing model (a
registered one a fraction of it; docs/performance.md has the figures). The ECP5 builds register
every memory read (``Implementation.registers`` from ``Registers.READS`` on); this pass, run
before nextpnr, puts those registers into the blocks. Yosys has no pass for it (its memory
library has no output registers).
"""

import json

__all__ = ["fold_netlist_file", "fold_output_registers"]


def fold_output_registers(netlist):
    """Move flip-flops that take a DP16KD's read data into the block's own output register.

    A read port of :class:`hwgen.device.accelerator.AcceleratorCore` with registered reads
    feeds each data bit to one flip-flop of its own, without reset, on the port's clock: this
    pass sets ``REGMODE`` to ``OUTREG``, drives the port's output clock enable with the
    flip-flops' enable, moves their outputs onto the block's pins and deletes them.

    A port is folded only if every data pin in use drives exactly one flip-flop input and
    nothing else, all on the port's clock, none with a set/reset or an inverted clock, all with
    one clock enable. A 36-bit read (both pin banks, port B's clock) is one port: both
    ``REGMODE`` settings and both enables are set alike.

    Parameters
    ----------
    netlist : dict
        A Yosys JSON netlist (``write_json``), changed in place.

    Returns
    -------
    list of (str, str)
        The (cell, port) pairs folded, port ``"A"``, ``"B"`` or ``"AB"`` (36 bits).
    """
    folded = []
    for module in netlist["modules"].values():
        cells = module.get("cells", {})
        readers = {}
        for name, cell in cells.items():
            for port, bits in cell["connections"].items():
                if cell["port_directions"].get(port) != "output":
                    for bit in bits:
                        readers.setdefault(bit, []).append((name, port))
        exposed = {bit for p in module.get("ports", {}).values() for bit in p["bits"]}
        for name in sorted(n for n, c in cells.items() if c["type"] == "DP16KD"):
            cell = cells[name]
            wide = int(cell["parameters"].get("DATA_WIDTH_B", "0"), 2) == 36
            for sides in (("A", "B"),) if wide else (("A",), ("B",)):
                clock = "CLKB" if wide else f"CLK{sides[0]}"
                plan = _fold_plan(cells, cell, sides, clock=clock, readers=readers,
                                  exposed=exposed)
                if plan is None:
                    continue
                enable, moves = plan
                for side in sides:
                    cell["parameters"][f"REGMODE_{side}"] = "OUTREG"
                    cell["connections"][f"OCE{side}"] = [enable]
                for pin, ff in moves:
                    cell["connections"][pin] = cells[ff]["connections"]["Q"]
                    del cells[ff]
                folded.append((name, "".join(sides)))
    return folded


def _fold_plan(cells, cell, sides, *, clock, readers, exposed):
    """Return ``(enable bit, [(pin, flip-flop)])`` for folding the flip-flops after one
    read port of a DP16KD, or None if they do not qualify (see :func:`fold_output_registers`)."""
    if any(cell["parameters"].get(f"REGMODE_{side}", "NOREG") != "NOREG" for side in sides):
        return None
    clk = cell["connections"][clock]
    enables, moves = set(), []
    for side in sides:
        for index in range(18):
            pin = f"DO{side}{index}"
            bit = cell["connections"].get(pin, ["x"])[0]
            if isinstance(bit, str) or bit not in readers:
                continue                          # a constant or an unused pin
            users = readers[bit]
            if bit in exposed or len(users) != 1 or users[0][1] != "DI":
                return None
            enable = _plain_register_enable(cells[users[0][0]], clk)
            if enable is None:
                return None
            enables.add(enable)
            moves.append((pin, users[0][0]))
    if len(enables) != 1 or not moves:
        return None
    return enables.pop(), moves


def _plain_register_enable(ff, clk):
    """Return the clock enable (a bit, or ``"1"``) of a TRELLIS_FF on ``clk`` without set or
    reset, or None for any other cell."""
    params, conn = ff["parameters"], ff["connections"]
    if ff["type"] != "TRELLIS_FF" or conn["CLK"] != clk or params.get("CLKMUX") != "CLK":
        return None
    if conn.get("LSR", ["0"]) != ["0"] or params.get("REGSET", "RESET") != "RESET":
        return None
    cemux = params.get("CEMUX", "1").strip()
    if cemux == "CE":
        return conn["CE"][0]
    return "1" if cemux == "1" else None


def fold_netlist_file(path, log):
    """Apply :func:`fold_output_registers` to a Yosys JSON netlist file, in place; say how many
    ports it folded through ``log``; return the folded ports."""
    netlist = json.loads(path.read_text())
    folded = fold_output_registers(netlist)
    if folded:
        path.write_text(json.dumps(netlist))
    log(f"      {len(folded)} block RAM read ports take their register into the block "
        f"(OUTREG)")
    return folded
