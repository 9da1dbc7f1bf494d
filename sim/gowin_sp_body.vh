// The body of the Gowin single-port BSRAM models (HWGEN_SIM_SP, HWGEN_SIM_SPX9),
// whose only differences are the data width D and the 9-bit mode X9 each module
// declares before including it.
  parameter READ_MODE = 1'b0;
  parameter WRITE_MODE = 2'b00;
  parameter BIT_WIDTH = D;
  parameter BLK_SEL = 3'b000;
  parameter BLK_SEL_0 = 3'b000;
  parameter BLK_SEL_1 = 3'b000;
  localparam WA = BIT_WIDTH, WB = BIT_WIDTH, RMA = READ_MODE, RMB = 0, WMA = WRITE_MODE, WMB = 0;
  wire clka = CLK, cea = CE & (BLKSEL == BLK_SEL), wea = WRE, rea = 1'b1, ocea = OCE, rsta = RESET;
  wire [13:0] ada = AD;
  wire [35:0] dia = DI;
  wire clkb = 1'b0, ceb = 1'b0, web = 1'b0, reb = 1'b0, oceb = 1'b0, rstb = 1'b0;
  wire [13:0] adb = 14'd0;
  wire [35:0] dib = 36'd0;
  assign DO = oa;
`include "gowin_bsram_body.vh"
