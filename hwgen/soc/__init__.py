"""The accelerator in a LiteX SoC: a VexRiscv CPU runs inference with no host (``hwgen soc``).

The Wishbone top (:mod:`hwgen.bus`) on the SoC's bus (:mod:`.litex_soc`), the firmware's C
sources and model image (:mod:`.firmware`, :mod:`.model_image`), LiteX's Verilator
simulation (:mod:`.sim`) and the board build with the YoWASP tools (:mod:`.board`). Only
:mod:`.litex_soc`, :mod:`.sim` and :mod:`.board` import LiteX (the extra ``soc``).
"""
