// Behavioural models of the Gowin primitives that Yosys's synth_gowin maps hwgen's memories
// and multipliers onto and for which Yosys ships only declarations: the BSRAM modes (the
// body, sim/gowin_bsram_body.vh) and MULT9X9/MULT18X18 (the subset hwgen uses: input, pipeline
// and output registers on CLK/CE/RESET, signed or unsigned operands, no shift chain). Not
// vendor models. sim/board/netlist.py renames the netlist's cells to HWGEN_SIM_<cell>.

module HWGEN_SIM_SP(output [31:0] DO, input [31:0] DI, input [2:0] BLKSEL, input [13:0] AD, input WRE, input CLK, input CE, input OCE, input RESET);
  localparam D = 32, X9 = 0;
`include "gowin_sp_body.vh"
endmodule

module HWGEN_SIM_SPX9(output [35:0] DO, input [35:0] DI, input [2:0] BLKSEL, input [13:0] AD, input WRE, input CLK, input CE, input OCE, input RESET);
  localparam D = 36, X9 = 1;
`include "gowin_sp_body.vh"
endmodule

module HWGEN_SIM_SDPB(input CLKA, CEA, CLKB, CEB, OCE, RESETA, RESETB, input [13:0] ADA, ADB, input [31:0] DI, input [2:0] BLKSELA, BLKSELB, output [31:0] DO);
  localparam D = 32, X9 = 0;
`include "gowin_sdp_body.vh"
endmodule

module HWGEN_SIM_SDPX9B(input CLKA, CEA, CLKB, CEB, OCE, RESETA, RESETB, input [13:0] ADA, ADB, input [35:0] DI, input [2:0] BLKSELA, BLKSELB, output [35:0] DO);
  localparam D = 36, X9 = 1;
`include "gowin_sdp_body.vh"
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
