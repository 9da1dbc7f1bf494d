// Behavioural models of the Gowin primitives that Yosys's synth_gowin maps hwgen's memories
// and multipliers onto and for which Yosys ships only declarations: the BSRAM modes (the
// body, sim/gowin_bsram_body.vh) and MULT9X9/MULT18X18 (the subset hwgen uses: input, pipeline
// and output registers on CLK/CE/RESET, signed or unsigned operands, no shift chain). Not
// vendor models. sim/board/netlist.py renames the netlist's cells to HWGEN_SIM_<cell>.

module HWGEN_SIM_SP(output [31:0] DO, input [31:0] DI, input [2:0] BLKSEL, input [13:0] AD, input WRE, input CLK, input CE, input OCE, input RESET);
  parameter READ_MODE = 1'b0;
  parameter WRITE_MODE = 2'b00;
  parameter BIT_WIDTH = 32;
  parameter BLK_SEL = 3'b000;
  parameter BLK_SEL_0 = 3'b000;
  parameter BLK_SEL_1 = 3'b000;
  localparam X9 = 0;
  localparam WA = BIT_WIDTH, WB = BIT_WIDTH, RMA = READ_MODE, RMB = 0, WMA = WRITE_MODE, WMB = 0;
  wire clka = CLK, cea = CE & (BLKSEL == BLK_SEL), wea = WRE, rea = 1'b1, ocea = OCE, rsta = RESET;
  wire [13:0] ada = AD;
  wire [35:0] dia = DI;
  wire clkb = 1'b0, ceb = 1'b0, web = 1'b0, reb = 1'b0, oceb = 1'b0, rstb = 1'b0;
  wire [13:0] adb = 14'd0;
  wire [35:0] dib = 36'd0;
  assign DO = oa;
`include "gowin_bsram_body.vh"
endmodule

module HWGEN_SIM_SPX9(output [35:0] DO, input [35:0] DI, input [2:0] BLKSEL, input [13:0] AD, input WRE, input CLK, input CE, input OCE, input RESET);
  parameter READ_MODE = 1'b0;
  parameter WRITE_MODE = 2'b00;
  parameter BIT_WIDTH = 36;
  parameter BLK_SEL = 3'b000;
  parameter BLK_SEL_0 = 3'b000;
  parameter BLK_SEL_1 = 3'b000;
  localparam X9 = 1;
  localparam WA = BIT_WIDTH, WB = BIT_WIDTH, RMA = READ_MODE, RMB = 0, WMA = WRITE_MODE, WMB = 0;
  wire clka = CLK, cea = CE & (BLKSEL == BLK_SEL), wea = WRE, rea = 1'b1, ocea = OCE, rsta = RESET;
  wire [13:0] ada = AD;
  wire [35:0] dia = DI;
  wire clkb = 1'b0, ceb = 1'b0, web = 1'b0, reb = 1'b0, oceb = 1'b0, rstb = 1'b0;
  wire [13:0] adb = 14'd0;
  wire [35:0] dib = 36'd0;
  assign DO = oa;
`include "gowin_bsram_body.vh"
endmodule

module HWGEN_SIM_SDPB(input CLKA, CEA, CLKB, CEB, OCE, RESETA, RESETB, input [13:0] ADA, ADB, input [31:0] DI, input [2:0] BLKSELA, BLKSELB, output [31:0] DO);
  parameter READ_MODE = 1'b0;
  parameter BIT_WIDTH_0 = 32;
  parameter BIT_WIDTH_1 = 32;
  parameter BLK_SEL = 3'b000;
  parameter BLK_SEL_0 = 3'b000;
  parameter BLK_SEL_1 = 3'b000;
  localparam X9 = 0;
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
endmodule

module HWGEN_SIM_SDPX9B(input CLKA, CEA, CLKB, CEB, OCE, RESETA, RESETB, input [13:0] ADA, ADB, input [35:0] DI, input [2:0] BLKSELA, BLKSELB, output [35:0] DO);
  parameter READ_MODE = 1'b0;
  parameter BIT_WIDTH_0 = 36;
  parameter BIT_WIDTH_1 = 36;
  parameter BLK_SEL = 3'b000;
  parameter BLK_SEL_0 = 3'b000;
  parameter BLK_SEL_1 = 3'b000;
  localparam X9 = 1;
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
endmodule

module HWGEN_SIM_DPB(input CLKA, CEA, CLKB, CEB, OCEA, OCEB, RESETA, RESETB, WREA, WREB, input [13:0] ADA, ADB, input [2:0] BLKSELA, BLKSELB, input [15:0] DIA, DIB, output [15:0] DOA, DOB);
  localparam D = 16, X9 = 0;
`include "gowin_dp_body.vh"
endmodule

module HWGEN_SIM_DPX9B(input CLKA, CEA, CLKB, CEB, OCEA, OCEB, RESETA, RESETB, WREA, WREB, input [13:0] ADA, ADB, input [2:0] BLKSELA, BLKSELB, input [17:0] DIA, DIB, output [17:0] DOA, DOB);
  localparam D = 18, X9 = 1;
`include "gowin_dp_body.vh"
endmodule

module HWGEN_SIM_MULT9X9(input [8:0] A, SIA, B, SIB, input ASIGN, BSIGN, ASEL, BSEL,
    input CE, CLK, RESET, output [17:0] DOUT, output [8:0] SOA, SOB);
  localparam W = 9;
`include "gowin_mult_body.vh"
endmodule

module HWGEN_SIM_MULT18X18(input [17:0] A, SIA, B, SIB, input ASIGN, BSIGN, ASEL, BSEL,
    input CE, CLK, RESET, output [35:0] DOUT, output [17:0] SOA, SOB);
  localparam W = 18;
`include "gowin_mult_body.vh"
endmodule
