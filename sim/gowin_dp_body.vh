// The body of the Gowin true dual-port BSRAM models (HWGEN_SIM_DPB, HWGEN_SIM_DPX9B), whose
// only differences are the data width D and the 9-bit mode X9 each module declares before
// including it.
  parameter READ_MODE0 = 1'b0;
  parameter READ_MODE1 = 1'b0;
  parameter WRITE_MODE0 = 2'b00;
  parameter WRITE_MODE1 = 2'b00;
  parameter BIT_WIDTH_0 = D;
  parameter BIT_WIDTH_1 = D;
  parameter BLK_SEL = 3'b000;
  parameter BLK_SEL_0 = 3'b000;
  parameter BLK_SEL_1 = 3'b000;
  localparam WA = BIT_WIDTH_0, WB = BIT_WIDTH_1, RMA = READ_MODE0, RMB = READ_MODE1;
  localparam WMA = WRITE_MODE0, WMB = WRITE_MODE1;
  wire clka = CLKA, cea = CEA & (BLKSELA == BLK_SEL_0), wea = WREA, rea = 1'b1, ocea = OCEA;
  wire rsta = RESETA;
  wire [13:0] ada = ADA;
  wire [35:0] dia = {{36 - D{1'b0}}, DIA};
  wire clkb = CLKB, ceb = CEB & (BLKSELB == BLK_SEL_1), web = WREB, reb = 1'b1, oceb = OCEB;
  wire rstb = RESETB;
  wire [13:0] adb = ADB;
  wire [35:0] dib = {{36 - D{1'b0}}, DIB};
  assign DOA = oa[D-1:0];
  assign DOB = ob[D-1:0];
`include "gowin_bsram_body.vh"
