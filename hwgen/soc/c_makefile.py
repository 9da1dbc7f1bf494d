"""The firmware's ``Makefile``: ``main.c`` on LiteX's libraries, linked into main RAM (a
string, so that it ships as Python)."""

__all__ = ["MAKEFILE"]

#: The file's text.
MAKEFILE = r"""# The firmware of `hwgen soc`: main.c on LiteX's libraries, linked into main RAM.
# BUILD_DIR is the LiteX build folder (its software/ holds the SoC's headers and libraries);
# linker.ld is LiteX's demo linker script, copied here by `hwgen soc`.
BUILD_DIR ?= ../build

include $(BUILD_DIR)/software/include/generated/variables.mak
include $(SOC_DIRECTORY)/software/common.mak

OBJECTS = crt0.o main.o

all: firmware.bin

%.bin: %.elf
	$(OBJCOPY) -O binary $< $@

vpath %.a $(PACKAGES:%=../%)

firmware.elf: $(OBJECTS)
	$(CC) $(LDFLAGS) -T linker.ld -N -o $@ $(OBJECTS) \
		$(PACKAGES:%=-L$(BUILD_DIR)/software/%) \
		-Wl,--whole-archive -Wl,--gc-sections -Wl,-Map,$@.map $(LIBS:lib%=-l%)

-include $(OBJECTS:.o=.d)

VPATH = $(BIOS_DIRECTORY):$(CPU_DIRECTORY)

main.o: CFLAGS += -I.

%.o: %.c
	$(compile)

%.o: %.S
	$(assemble)

.PHONY: all
"""
