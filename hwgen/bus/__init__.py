"""The accelerator on standard buses: an AXI4-Stream top and a Wishbone top with its map."""
