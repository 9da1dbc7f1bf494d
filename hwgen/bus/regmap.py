"""The Wishbone top's address map: its registers, their fields, and the memory windows.

One description, derived from an :class:`~hwgen.config.AcceleratorConfig`, that the gateware
(:class:`hwgen.bus.wishbone_top.WishboneTop`), the C header and the JSON description
(:mod:`hwgen.bus.describe`) and the tests all read, so that they cannot disagree.

The core answers a window of ``8 << window_shift`` bus words (32-bit words; Wishbone ``adr``
counts words, as LiteX's does). Slot 0 is the register page; slot ``r + 1`` is the window of
:class:`~hwgen.memmap.Region` ``r``. A region's word of ``word_bits`` bits takes ``stride``
bus words (a power of two), little-endian: bus word ``addr * stride + k`` holds bits
``32k .. 32k + 31`` of memory word ``addr``. The map's offsets never move once published:
new registers are added at free offsets (:data:`MAP_VERSION` counts the additions).
"""

import dataclasses
import math

from ..memmap import Region, batch_bits, regions

__all__ = ["ADDR_WIDTH", "ID_VALUE", "MAP_VERSION", "REGISTER_PAGE_WORDS", "Field", "Register",
           "RegisterMap", "Window"]

#: Width of Wishbone ``adr``: a word address of a 32-bit byte address space (as LiteX's bus).
ADDR_WIDTH = 30
#: Bus words of the register page (slot 0), 256 bytes.
REGISTER_PAGE_WORDS = 64
#: ``ID``'s value: "hwgn" in ASCII, so that a driver knows it found the core.
ID_VALUE = 0x6877676E
#: Version of the register map; bumped when registers are added (never moved).
MAP_VERSION = 1
#: The largest ``window_shift`` (bus words per window, log2): the core within 30 bits of ``adr``.
_MAX_SHIFT = ADDR_WIDTH - 3


@dataclasses.dataclass(frozen=True)
class Field:
    """Bits ``lsb .. lsb + width - 1`` of a register."""

    name: str
    lsb: int
    width: int
    doc: str

    @property
    def mask(self):
        return ((1 << self.width) - 1) << self.lsb


@dataclasses.dataclass(frozen=True)
class Register:
    """A 32-bit register of the page at byte ``offset``.

    ``access`` is ``"ro"`` (writes ignored), ``"rw"`` or ``"wo"`` (write 1 to a field to act;
    reads 0). ``reset`` is the value after reset, or for an INFO register its constant value.
    """

    name: str
    offset: int
    access: str
    doc: str
    fields: tuple = ()
    reset: int = 0

    def field(self, name):
        """Return field ``name``."""
        return next(f for f in self.fields if f.name == name)


@dataclasses.dataclass(frozen=True)
class Window:
    """Where the bus sees a memory region: ``offset`` bytes from the core's base, ``size``
    bytes, ``depth`` words of ``word_bits`` bits, each ``stride`` bus words apart (its first
    ``pieces`` hold the word; an access to the others answers ``err``)."""

    region: Region
    offset: int
    size: int
    depth: int
    word_bits: int
    stride: int

    @property
    def name(self):
        return self.region.name

    @property
    def pieces(self):
        return math.ceil(self.word_bits / 32)


def _f(name, lsb, width=1, doc=""):
    return Field(name, lsb, width, doc)


def _control_status(config):
    """The registers that run the core."""
    bb = batch_bits(config)
    return [
        Register("ID", 0x00, "ro", "Identifies the core: 0x6877676E (\"hwgn\").",
                 (_f("ID", 0, 32),), ID_VALUE),
        Register("VERSION", 0x04, "ro", "The register map's version.",
                 (_f("MAP", 0, 16, "register map version"),), MAP_VERSION),
        Register("CONTROL", 0x08, "wo", "Write 1 to a field to act; reads 0.", (
            _f("START", 0, doc="run the program in PROGRAM from word 0 on BATCH rows (idle "
                               "only; else ERROR_CAUSE.START_BUSY); clears DONE"),
            _f("CLEAR_DONE", 1, doc="clear STATUS.DONE and so the interrupt"),
            _f("CLEAR_COUNTERS", 2, doc="zero the cycle, busy-cycle and MAC counters and RUNS"),
            _f("CLEAR_ERROR", 3, doc="clear STATUS.ERROR and ERROR_CAUSE"))),
        Register("STATUS", 0x0C, "ro", "The core's state.", (
            _f("BUSY", 0, doc="a run is in progress: memory windows answer err"),
            _f("DONE", 1, doc="a run has ended since START or CLEAR_DONE"),
            _f("ERROR", 2, doc="some ERROR_CAUSE bit is set"),
            _f("IRQ", 3, doc="the irq output: DONE and IRQ_ENABLE.DONE"))),
        Register("BATCH", 0x10, "rw", f"Rows of the next run: 1 .. acc_depth "
                 f"({config.acc_depth}); START with another value sets ERROR_CAUSE.BAD_BATCH.",
                 (_f("BATCH", 0, bb),), 1),
        Register("IRQ_ENABLE", 0x14, "rw", "Which events raise irq.",
                 (_f("DONE", 0, doc="irq follows STATUS.DONE"),), 1),
        Register("RUNS", 0x18, "ro", "Runs started since reset or CLEAR_COUNTERS.",
                 (_f("RUNS", 0, 32),)),
        Register("ERROR_CAUSE", 0x1C, "ro", "Why STATUS.ERROR is set (sticky until "
                 "CONTROL.CLEAR_ERROR).", (
                     _f("START_BUSY", 0, doc="START while a run was in progress (ignored)"),
                     _f("BAD_BATCH", 1, doc="START with BATCH 0 or above acc_depth (ignored)"),
                     _f("BUS", 2, doc="an access was answered with err"))),
    ]


_COUNTERS = (("CYCLES", "cycles with a run in progress"),
             ("BUSY_CYCLES", "cycles in which an activation row entered the array"),
             ("MACS", "multiply-accumulates issued"))


def _counters():
    """The 64-bit counters as LO/HI pairs: reading LO latches HI."""
    regs = []
    for i, (name, doc) in enumerate(_COUNTERS):
        base = 0x20 + 8 * i
        regs.append(Register(f"{name}_LO", base, "ro", f"Bits 0..31 of {doc}, since reset or "
                             "CLEAR_COUNTERS; reading it latches bits 32..63 for _HI.",
                             (_f("VALUE", 0, 32),)))
        regs.append(Register(f"{name}_HI", base + 4, "ro", f"Bits 32..63 of {doc}, as latched "
                             f"by the last read of {name}_LO.", (_f("VALUE", 0, 32),)))
    return regs


def _info(config, windows, shift):
    """Constant registers: what the core was generated for."""
    regs = [
        Register("CONFIG_HASH", 0x40, "ro", "The configuration's hash, its first 8 hex digits "
                 "(a compiled program names the hash it was compiled for).",
                 (_f("HASH", 0, 32),), config.hash_int >> 32),
        Register("ARRAY", 0x44, "ro", "The systolic array.",
                 (_f("ROWS", 0, 8), _f("COLS", 8, 8), _f("ACT_LANES", 16, 8),
                  _f("DATAFLOW", 24, 1, "0: weight stationary, 1: output stationary")),
                 config.rows | config.cols << 8 | config.act_lanes << 16
                 | (config.dataflow.value == "os") << 24),
        Register("BITS", 0x48, "ro", "Operand widths.",
                 (_f("IN_BITS", 0, 8), _f("W_BITS", 8, 8), _f("ACC_BITS", 16, 8)),
                 config.in_bits | config.w_bits << 8 | config.acc_bits << 16),
        Register("ACC_DEPTH", 0x4C, "ro", "The largest BATCH.", (_f("DEPTH", 0, 32),),
                 config.acc_depth),
        Register("CLOCK_HZ", 0x50, "ro", "The clock the design was generated for.",
                 (_f("HZ", 0, 32),), config.clock_hz),
        Register("WINDOW_SHIFT", 0x54, "ro", "log2 of a window's bus words: window r + 1 "
                 "starts at byte 4 << WINDOW_SHIFT times (r + 1).", (_f("SHIFT", 0, 5),),
                 shift),
    ]
    for w in windows:
        base = 0x80 + 16 * w.region.value
        regs += [
            Register(f"{w.name}_DEPTH", base, "ro", f"Words of {w.name}.",
                     (_f("DEPTH", 0, 32),), w.depth),
            Register(f"{w.name}_WORD_BITS", base + 4, "ro", f"Bits of a {w.name} word.",
                     (_f("BITS", 0, 32),), w.word_bits),
            Register(f"{w.name}_STRIDE", base + 8, "ro", f"Bus words per {w.name} word.",
                     (_f("STRIDE", 0, 32),), w.stride),
            Register(f"{w.name}_OFFSET", base + 12, "ro", f"Byte offset of the {w.name} "
                     "window from the core's base.", (_f("OFFSET", 0, 32),), w.offset),
        ]
    return regs


class RegisterMap:
    """The address map of the Wishbone top for ``config``.

    Attributes
    ----------
    registers : tuple of Register
        By offset.
    windows : tuple of Window
        One per :class:`~hwgen.memmap.Region`, in region order.
    window_shift : int
        log2 of the bus words of a slot (the register page and each window).
    size : int
        Bytes the core answers (``32 << window_shift``): the size of its region in a SoC.

    Raises
    ------
    ValueError
        If the memories are too large for a 32-bit byte address space, naming the largest.
    """

    def __init__(self, config):
        geo = regions(config)
        spans = {r: g.depth * (1 << (math.ceil(g.word_bits / 32) - 1).bit_length())
                 for r, g in geo.items()}
        shift = max(REGISTER_PAGE_WORDS.bit_length() - 1,
                    *((s - 1).bit_length() for s in spans.values()))
        if shift > _MAX_SHIFT:
            big = max(spans, key=spans.get)
            raise ValueError(
                f"the Wishbone top cannot map {big.name}: {spans[big]} bus words need a window "
                f"of 2**{shift} words, and eight windows must fit 2**{ADDR_WIDTH} words; "
                f"allowed: a window of at most 2**{_MAX_SHIFT} words")
        self.config = config
        self.window_shift = shift
        self.size = 32 << shift
        self.windows = tuple(
            Window(r, (r.value + 1) << (shift + 2), 4 << shift, g.depth, g.word_bits,
                   1 << (math.ceil(g.word_bits / 32) - 1).bit_length())
            for r, g in geo.items())
        regs = _control_status(config) + _counters() + _info(config, self.windows, shift)
        self.registers = tuple(sorted(regs, key=lambda r: r.offset))

    def __getitem__(self, name):
        """Return register ``name``."""
        for reg in self.registers:
            if reg.name == name:
                return reg
        raise KeyError(f"no register {name!r}; registers: "
                       f"{', '.join(r.name for r in self.registers)}")

    def window(self, region):
        """Return the :class:`Window` of ``region``."""
        return self.windows[Region(region).value]
