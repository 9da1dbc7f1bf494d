  // Behaviour of a Gowin 18 Kbit BSRAM for simulation (not a vendor model; Yosys ships only
  // declarations). Written from Gowin's BSRAM user guide (UG285) for the modes Yosys's
  // synth_gowin maps: SP, DPB, SDPB in 8-bit bytes (widths 1, 2, 4, 8, 16, 32) and SPX9,
  // DPX9B, SDPX9B in 9-bit bytes (9, 18, 36); a word's address on AD[13:k], byte enables on
  // AD[3:0] (32/36) or AD[1:0] (16/18) of a writing port; READ_MODE 0 (the read register) or 1
  // (one more, on OCE), WRITE_MODE 0 (no read on a write), 1 (the new word), 2 (the old word),
  // a synchronous or asynchronous RESET of the output, INIT_RAM_xx. Each wrapper in
  // sim/gowin_cells_model.v declares the primitive's ports and parameters and maps them onto
  // the names below. A read of a byte that the other port writes in the same cycle returns the
  // old byte and reports the collision on stderr (hardware returns undefined data).
  parameter RESET_MODE = "SYNC";
  parameter INIT_RAM_00 = 288'h0;
  parameter INIT_RAM_01 = 288'h0;
  parameter INIT_RAM_02 = 288'h0;
  parameter INIT_RAM_03 = 288'h0;
  parameter INIT_RAM_04 = 288'h0;
  parameter INIT_RAM_05 = 288'h0;
  parameter INIT_RAM_06 = 288'h0;
  parameter INIT_RAM_07 = 288'h0;
  parameter INIT_RAM_08 = 288'h0;
  parameter INIT_RAM_09 = 288'h0;
  parameter INIT_RAM_0A = 288'h0;
  parameter INIT_RAM_0B = 288'h0;
  parameter INIT_RAM_0C = 288'h0;
  parameter INIT_RAM_0D = 288'h0;
  parameter INIT_RAM_0E = 288'h0;
  parameter INIT_RAM_0F = 288'h0;
  parameter INIT_RAM_10 = 288'h0;
  parameter INIT_RAM_11 = 288'h0;
  parameter INIT_RAM_12 = 288'h0;
  parameter INIT_RAM_13 = 288'h0;
  parameter INIT_RAM_14 = 288'h0;
  parameter INIT_RAM_15 = 288'h0;
  parameter INIT_RAM_16 = 288'h0;
  parameter INIT_RAM_17 = 288'h0;
  parameter INIT_RAM_18 = 288'h0;
  parameter INIT_RAM_19 = 288'h0;
  parameter INIT_RAM_1A = 288'h0;
  parameter INIT_RAM_1B = 288'h0;
  parameter INIT_RAM_1C = 288'h0;
  parameter INIT_RAM_1D = 288'h0;
  parameter INIT_RAM_1E = 288'h0;
  parameter INIT_RAM_1F = 288'h0;
  parameter INIT_RAM_20 = 288'h0;
  parameter INIT_RAM_21 = 288'h0;
  parameter INIT_RAM_22 = 288'h0;
  parameter INIT_RAM_23 = 288'h0;
  parameter INIT_RAM_24 = 288'h0;
  parameter INIT_RAM_25 = 288'h0;
  parameter INIT_RAM_26 = 288'h0;
  parameter INIT_RAM_27 = 288'h0;
  parameter INIT_RAM_28 = 288'h0;
  parameter INIT_RAM_29 = 288'h0;
  parameter INIT_RAM_2A = 288'h0;
  parameter INIT_RAM_2B = 288'h0;
  parameter INIT_RAM_2C = 288'h0;
  parameter INIT_RAM_2D = 288'h0;
  parameter INIT_RAM_2E = 288'h0;
  parameter INIT_RAM_2F = 288'h0;
  parameter INIT_RAM_30 = 288'h0;
  parameter INIT_RAM_31 = 288'h0;
  parameter INIT_RAM_32 = 288'h0;
  parameter INIT_RAM_33 = 288'h0;
  parameter INIT_RAM_34 = 288'h0;
  parameter INIT_RAM_35 = 288'h0;
  parameter INIT_RAM_36 = 288'h0;
  parameter INIT_RAM_37 = 288'h0;
  parameter INIT_RAM_38 = 288'h0;
  parameter INIT_RAM_39 = 288'h0;
  parameter INIT_RAM_3A = 288'h0;
  parameter INIT_RAM_3B = 288'h0;
  parameter INIT_RAM_3C = 288'h0;
  parameter INIT_RAM_3D = 288'h0;
  parameter INIT_RAM_3E = 288'h0;
  parameter INIT_RAM_3F = 288'h0;
  localparam BW = X9 ? 9 : 8;
  reg [8:0] mem [0:2047];

  function [10:0] first_byte(input integer width, input [13:0] ad);
    case (width)
      32, 36: first_byte = {ad[13:5], 2'b00};
      16, 18: first_byte = {ad[13:4], 1'b0};
      default: first_byte = ad[13:3];     // 8, 9, and the byte holding a 4, 2 or 1-bit word
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
    nbytes = width >= 32 ? 4 : width >= 16 ? 2 : 1;
  endfunction
  function [35:0] word(input integer width, input [13:0] ad);
    reg [10:0] b;
    reg [2:0] o;
    integer k;
    begin
      b = first_byte(width, ad);
      o = bit_offset(width, ad);
      word = 36'd0;
      if (width >= 8)
        for (k = 0; k < nbytes(width); k = k + 1)   // upward: an 8-bit byte's ninth bit is
          word[k * BW +: 9] = mem[b + k[10:0]];     // 0, and the next byte overwrites it
      else
        for (k = 0; k < width; k = k + 1)
          word[k] = mem[b][o + k[2:0]];
    end
  endfunction
  // Whether a write of `width` at `ad` changes byte `k`, and the byte it leaves.
  function writes(input integer width, input [13:0] ad, input [10:0] k);
    reg [10:0] b;
    begin
      b = first_byte(width, ad);
      if (k < b || k >= b + nbytes(width)) writes = 1'b0;
      else if (width >= 16) writes = ad[k - b];   // byte enables
      else writes = 1'b1;
    end
  endfunction
  function [8:0] written(input integer width, input [13:0] ad, input [35:0] d, input [10:0] k);
    reg [10:0] b;
    reg [2:0] o;
    reg [8:0] v;
    begin
      b = first_byte(width, ad);
      o = bit_offset(width, ad);
      v = mem[k];
      if (width >= 8) v = X9 ? d[(k - b) * 9 +: 9] : {1'b0, d[(k - b) * 8 +: 8]};
      else if (width == 4) v[o +: 4] = d[3:0];
      else if (width == 2) v[o +: 2] = d[1:0];
      else v[o] = d[0];
      written = v;
    end
  endfunction

  integer i, j;
  task load(input integer idx, input [287:0] v);
    for (j = 0; j < 32; j = j + 1) mem[idx * 32 + j] = X9 ? v[j * 9 +: 9] : {1'b0, v[j * 8 +: 8]};
  endtask

  wire [10:0] ba = first_byte(WA, ada), bb = first_byte(WB, adb);
  reg [35:0] qa = 36'd0, qb = 36'd0, ra = 36'd0, rb = 36'd0;
  reg warned = 1'b0;

  initial begin
    load(0, INIT_RAM_00);
    load(1, INIT_RAM_01);
    load(2, INIT_RAM_02);
    load(3, INIT_RAM_03);
    load(4, INIT_RAM_04);
    load(5, INIT_RAM_05);
    load(6, INIT_RAM_06);
    load(7, INIT_RAM_07);
    load(8, INIT_RAM_08);
    load(9, INIT_RAM_09);
    load(10, INIT_RAM_0A);
    load(11, INIT_RAM_0B);
    load(12, INIT_RAM_0C);
    load(13, INIT_RAM_0D);
    load(14, INIT_RAM_0E);
    load(15, INIT_RAM_0F);
    load(16, INIT_RAM_10);
    load(17, INIT_RAM_11);
    load(18, INIT_RAM_12);
    load(19, INIT_RAM_13);
    load(20, INIT_RAM_14);
    load(21, INIT_RAM_15);
    load(22, INIT_RAM_16);
    load(23, INIT_RAM_17);
    load(24, INIT_RAM_18);
    load(25, INIT_RAM_19);
    load(26, INIT_RAM_1A);
    load(27, INIT_RAM_1B);
    load(28, INIT_RAM_1C);
    load(29, INIT_RAM_1D);
    load(30, INIT_RAM_1E);
    load(31, INIT_RAM_1F);
    load(32, INIT_RAM_20);
    load(33, INIT_RAM_21);
    load(34, INIT_RAM_22);
    load(35, INIT_RAM_23);
    load(36, INIT_RAM_24);
    load(37, INIT_RAM_25);
    load(38, INIT_RAM_26);
    load(39, INIT_RAM_27);
    load(40, INIT_RAM_28);
    load(41, INIT_RAM_29);
    load(42, INIT_RAM_2A);
    load(43, INIT_RAM_2B);
    load(44, INIT_RAM_2C);
    load(45, INIT_RAM_2D);
    load(46, INIT_RAM_2E);
    load(47, INIT_RAM_2F);
    load(48, INIT_RAM_30);
    load(49, INIT_RAM_31);
    load(50, INIT_RAM_32);
    load(51, INIT_RAM_33);
    load(52, INIT_RAM_34);
    load(53, INIT_RAM_35);
    load(54, INIT_RAM_36);
    load(55, INIT_RAM_37);
    load(56, INIT_RAM_38);
    load(57, INIT_RAM_39);
    load(58, INIT_RAM_3A);
    load(59, INIT_RAM_3B);
    load(60, INIT_RAM_3C);
    load(61, INIT_RAM_3D);
    load(62, INIT_RAM_3E);
    load(63, INIT_RAM_3F);
  end

  wire arsta = RESET_MODE == "ASYNC" && rsta, arstb = RESET_MODE == "ASYNC" && rstb;
  always @(posedge clka or posedge arsta) begin
    if (rsta) begin
      qa <= 36'd0;
    end else if (cea) begin
      if (rea && !(wea && WMA == 0))
        qa <= (wea && WMA == 1) ? dia : word(WA, ada);
      if (wea)
        for (i = 0; i < 4; i = i + 1)
          if (writes(WA, ada, ba + i[10:0])) mem[ba + i[10:0]] <= written(WA, ada, dia, ba + i[10:0]);
    end
  end
  always @(posedge clkb or posedge arstb) begin
    if (rstb) begin
      qb <= 36'd0;
    end else if (ceb) begin
      if (reb && !(web && WMB == 0))
        qb <= (web && WMB == 1) ? dib : word(WB, adb);
      if (web)
        for (i = 0; i < 4; i = i + 1)
          if (writes(WB, adb, bb + i[10:0])) mem[bb + i[10:0]] <= written(WB, adb, dib, bb + i[10:0]);
      if (!warned)
        for (j = 0; j < 4; j = j + 1)
          if ((reb && cea && wea && writes(WA, ada, bb + j[10:0]) && j < nbytes(WB))
              || (rea && cea && web && writes(WB, adb, ba + j[10:0]) && j < nbytes(WA))) begin
            $fwrite(32'h80000002, "hwgen-sim: %m: a port read a byte the other port wrote in the same cycle (undefined on hardware)\n");
            warned <= 1'b1;
          end
    end
  end
  // READ_MODE 1: one more register, loaded when OCE is high.
  always @(posedge clka) if (ocea) ra <= qa;
  always @(posedge clkb) if (oceb) rb <= qb;
  wire [35:0] oa = RMA ? ra : qa;
  wire [35:0] ob = RMB ? rb : qb;
