  // Behaviour of the ECP5 DP16KD block RAM for simulation (not a vendor model; Yosys ships only
  // a black box). Written from the Lattice ECP5 memory usage guide (FPGA-TN-02204) for the modes
  // Yosys maps: data widths 1, 2, 4, 9, 18 per port and 36 (port A writes on DIA/DIB, port B
  // reads on DOA/DOB), byte enables on the low address bits, WRITEMODE, RESETMODE, CSDECODE,
  // REGMODE and INITVAL. `sim/board/netlist.py` puts this body into the primitive's declaration.
  // Storage: 2048 bytes of 9 bits; a word of width w at address a covers bytes (or, for 1, 2
  // and 4, bits of the 8 data bits of a byte) from the bottom up, as Yosys's memory mapping
  // assumes. A read of a byte that the other port writes in the same cycle returns the old
  // byte and reports the collision on stderr (hardware returns undefined data).
  reg [8:0] mem [0:2047];
  wire [13:0] ada = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0};
  wire [13:0] adb = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0};
  wire [17:0] dia = {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
  wire [17:0] dib = {DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0};
  wire clka = (CLKAMUX == "INV") ? ~CLKA : CLKA;
  wire clkb = (CLKBMUX == "INV") ? ~CLKB : CLKB;
  // CSDECODE is "0bXYZ": the low bit of each character is its digit.
  wire sela = {CSA2, CSA1, CSA0} == {CSDECODE_A[16], CSDECODE_A[8], CSDECODE_A[0]};
  wire selb = {CSB2, CSB1, CSB0} == {CSDECODE_B[16], CSDECODE_B[8], CSDECODE_B[0]};
  wire rsta = (RESETMODE == "ASYNC") & RSTA;
  wire rstb = (RESETMODE == "ASYNC") & RSTB;

  // The bytes a port touches: first byte, number of bytes (9 bits each), or for 1/2/4-bit
  // widths one byte and the data bits' offset in it.
  function [11:0] first_byte(input integer width, input [13:0] ad);
    case (width)
      36: first_byte = {ad[13:5], 2'b00};
      18: first_byte = {ad[13:4], 1'b0};
      default: first_byte = ad[13:3];     // 9, and the byte holding a 4, 2 or 1-bit word
    endcase
  endfunction
  function [2:0] bit_offset(input integer width, input [13:0] ad);
    case (width)
      4: bit_offset = {ad[2], 2'b00};
      2: bit_offset = {ad[2:1], 1'b0};
      1: bit_offset = ad[2:0];
      default: bit_offset = 3'd0;
    endcase
  endfunction
  function integer nbytes(input integer width);
    nbytes = width == 36 ? 4 : width == 18 ? 2 : 1;
  endfunction

  // The word a port reads, in the pin order of its data outputs (36: DOB, DOA).
  function [35:0] word(input integer width, input [13:0] ad);
    reg [11:0] b;
    reg [2:0] o;
    begin
      b = first_byte(width, ad);
      o = bit_offset(width, ad);
      case (width)
        36: word = {mem[b + 3], mem[b + 2], mem[b + 1], mem[b]};
        18: word = {18'd0, mem[b + 1], mem[b]};
        9: word = {27'd0, mem[b]};
        4: word = {32'd0, mem[b][o +: 4]};
        2: word = {34'd0, mem[b][o +: 2]};
        default: word = {35'd0, mem[b][o]};
      endcase
    end
  endfunction

  // Whether a write of `width` at `ad` with data pins `d` (36: {DIB, DIA}) changes byte `k`
  // (byte enables: address bits 0..3 for 36, 0..1 for 18), and the byte it leaves.
  function writes(input integer width, input [13:0] ad, input [11:0] k);
    reg [11:0] b;
    begin
      b = first_byte(width, ad);
      if (k < b || k >= b + nbytes(width)) writes = 1'b0;
      else if (width >= 18) writes = ad[k - b];   // byte enables
      else writes = 1'b1;
    end
  endfunction
  function [8:0] written(input integer width, input [13:0] ad, input [35:0] d, input [11:0] k);
    reg [11:0] b;
    reg [2:0] o;
    reg [8:0] v;
    begin
      b = first_byte(width, ad);
      o = bit_offset(width, ad);
      v = mem[k];
      case (width)
        36, 18: v = d[(k - b) * 9 +: 9];
        9: v = d[8:0];
        4: v[o +: 4] = d[3:0];
        2: v[o +: 2] = d[1:0];
        default: v[o] = d[0];
      endcase
      written = v;
    end
  endfunction

  localparam WA = DATA_WIDTH_A, WB = DATA_WIDTH_B;
  wire [35:0] din_a = WA == 36 ? {dib, dia} : {18'd0, dia};
  wire we_a = WEA & CEA & sela;
  wire we_b = (WA != 36) & WEB & CEB & selb;
  wire re_a = (WA != 36) & CEA & sela;
  wire re_b = CEB & selb;
  wire [11:0] ba = first_byte(WA, ada), bb = first_byte(WB, adb);
  reg [35:0] qa = 36'd0, qb = 36'd0, ra = 36'd0, rb = 36'd0;
  reg warned = 1'b0;
  integer i, j;

  task load(input integer idx, input [319:0] v);
    for (j = 0; j < 16; j = j + 1) begin
      mem[2 * (idx * 16 + j)] = v[j * 20 +: 9];
      mem[2 * (idx * 16 + j) + 1] = v[j * 20 + 9 +: 9];
    end
  endtask

  initial begin
    if (REGMODE_A != "NOREG" && REGMODE_A != "OUTREG") $fatal(1, "%m: REGMODE_A %s", REGMODE_A);
    if (REGMODE_B != "NOREG" && REGMODE_B != "OUTREG") $fatal(1, "%m: REGMODE_B %s", REGMODE_B);
    if (WB == 36 && WA != 36) $fatal(1, "%m: a 36-bit read port needs a 36-bit write port");
    if (WA == 36 && WEB) $fatal(1, "%m: port B cannot write in 36-bit mode");
HWGEN_INITVAL_LOADS
  end

  always @(posedge clka or posedge rsta) begin
    if (rsta || ((RESETMODE == "SYNC") && RSTA)) begin
      qa <= 36'd0;
    end else begin
      if (re_a && !(we_a && WRITEMODE_A == "NORMAL"))
        qa <= (we_a && WRITEMODE_A == "WRITETHROUGH") ? din_a : word(WA, ada);
      if (we_a)
        for (i = 0; i < 4; i = i + 1)
          if (writes(WA, ada, ba + i[11:0])) mem[ba + i[11:0]] <= written(WA, ada, din_a, ba + i[11:0]);
    end
  end
  always @(posedge clkb or posedge rstb) begin
    if (rstb || ((RESETMODE == "SYNC") && RSTB)) begin
      qb <= 36'd0;
    end else begin
      if (re_b && !(we_b && WRITEMODE_B == "NORMAL"))
        qb <= (we_b && WRITEMODE_B == "WRITETHROUGH") ? {18'd0, dib} : word(WB, adb);
      if (we_b)
        for (i = 0; i < 2; i = i + 1)
          if (writes(WB, adb, bb + i[11:0])) mem[bb + i[11:0]] <= written(WB, adb, {18'd0, dib}, bb + i[11:0]);
      if (!warned) begin
        for (j = 0; j < 4; j = j + 1)
          if ((re_b && we_a && writes(WA, ada, bb + j[11:0]) && j < nbytes(WB))
              || (re_a && we_b && writes(WB, adb, ba + j[11:0]) && j < nbytes(WA))) begin
            $fwrite(32'h80000002, "hwgen-sim: %m: a port read a byte the other port wrote in the same cycle (undefined on hardware)\n");
            warned <= 1'b1;
          end
      end
    end
  end
  // OUTREG: one more register, loaded when OCE is high.
  always @(posedge clka) if (OCEA) ra <= qa;
  always @(posedge clkb) if (OCEB) rb <= qb;
  wire [35:0] oa = REGMODE_A == "OUTREG" ? ra : qa;
  wire [35:0] ob = REGMODE_B == "OUTREG" ? rb : qb;
  // 36 bits: the word leaves on DOA (low half) and DOB (high half).
  wire [17:0] pins_a = WB == 36 ? ob[17:0] : oa[17:0];
  wire [17:0] pins_b = WB == 36 ? ob[35:18] : ob[17:0];
  assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0} = pins_a;
  assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0} = pins_b;
