// The body of the Gowin simple dual-port BSRAM models (HWGEN_SIM_SDPB, HWGEN_SIM_SDPX9B),
// whose only differences are the data width D and the 9-bit mode X9 each module
// declares before including it.
  parameter READ_MODE = 1'b0;
  parameter BIT_WIDTH_0 = D;
  parameter BIT_WIDTH_1 = D;
  parameter BLK_SEL = 3'b000;
  parameter BLK_SEL_0 = 3'b000;
  parameter BLK_SEL_1 = 3'b000;
  localparam WA = BIT_WIDTH_0, WB = BIT_WIDTH_1, RMA = 0, RMB = READ_MODE, WMA = 0, WMB = 0;
  // Port A writes on CEA, port B reads on CEB.
  wire clka = CLKA, cea = CEA & (BLKSELA == BLK_SEL_0), wea = 1'b1, rea = 1'b0, ocea = 1'b0;
  wire rsta = RESETA;
  wire [13:0] ada = ADA;
  wire [35:0] dia = DI;
  wire clkb = CLKB, ceb = CEB & (BLKSELB == BLK_SEL_1), web = 1'b0, reb = 1'b1, oceb = OCE;
  wire rstb = RESETB;
  wire [13:0] adb = ADB;
  wire [35:0] dib = 36'd0;
  assign DO = ob;
`include "gowin_bsram_body.vh"
