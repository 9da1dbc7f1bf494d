// The body of the Gowin multiplier models (HWGEN_SIM_MULT9X9, HWGEN_SIM_MULT18X18), whose
// only difference is the operand width W each module declares before including it.
  parameter AREG = 1'b0;
  parameter BREG = 1'b0;
  parameter OUT_REG = 1'b0;
  parameter PIPE_REG = 1'b0;
  parameter ASIGN_REG = 1'b0;
  parameter BSIGN_REG = 1'b0;
  parameter SOA_REG = 1'b0;
  parameter MULT_RESET_MODE = "SYNC";
  reg [W-1:0] ra = 0, rb = 0;
  reg sa = 0, sb = 0;
  reg [2*W-1:0] rp = 0, ro = 0;
  wire [W-1:0] ia = AREG ? ra : (ASEL ? SIA : A);
  wire [W-1:0] ib = BREG ? rb : (BSEL ? SIB : B);
  wire ias = ASIGN_REG ? sa : ASIGN, ibs = BSIGN_REG ? sb : BSIGN;
  wire signed [W:0] ea = {ias & ia[W-1], ia};
  wire signed [W:0] eb = {ibs & ib[W-1], ib};
  wire signed [2*W+1:0] prod = ea * eb;
  wire [2*W-1:0] p = PIPE_REG ? rp : prod[2*W-1:0];
  always @(posedge CLK) begin
    if (RESET) begin
      ra <= 0; rb <= 0; sa <= 0; sb <= 0; rp <= 0; ro <= 0;
    end else if (CE) begin
      ra <= ASEL ? SIA : A; rb <= BSEL ? SIB : B; sa <= ASIGN; sb <= BSIGN;
      rp <= prod[2*W-1:0]; ro <= p;
    end
  end
  assign DOUT = OUT_REG ? ro : p;
  assign SOA = ia;
  assign SOB = ib;
