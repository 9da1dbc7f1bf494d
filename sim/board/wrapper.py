"""The Verilog module the harness drives: the device of a board with registered link inputs.

The harness (``sim/board_main.cpp``) drives a module named :data:`_WRAPPER_MODULE` with a
clock, a reset and either the UART pins (``rx``, ``tx``) or a byte-stream interface with flow
control; the wrapper adapts the generated device (module :data:`_DEVICE_MODULE`) to it. The
gate-level board (:mod:`sim.board.netlist`) writes its own wrapper of the same name.
"""

from hwgen.generate import ports

from .errors import BoardError

# Name of the device module inside the board's Verilog, and of the wrapper around it.
_DEVICE_MODULE = "hwgen_device"
_WRAPPER_MODULE = "hwgen_board"


def _wrapper(component, uart):
    """Return Verilog of the module the harness drives: the device with registered link inputs.

    Registering the inputs (and the reset) keeps every input-dependent signal of the device out
    of Verilator's input-combinational region, which is evaluated on both clock edges; on a small
    design that makes the model about a third faster. The byte stream gets a two-entry FIFO so
    that one byte per cycle still gets through; the response bytes are captured in a register.
    Its ``rest`` is the device's (built with ``gate_idle``) with the FIFO and the register
    empty: the harness stops clocking while it is high and no byte waits.
    """
    names = {p["name"] for p in ports(component)}
    need = {"rx", "tx", "busy"} if uart else {
        "i_stream__payload", "i_stream__valid", "i_stream__ready", "o_stream__payload",
        "o_stream__valid", "o_stream__ready", "busy", "rest"}
    if need - names:
        raise BoardError(f"the device has no port(s) {', '.join(sorted(need - names))}; the "
                         "simulated board needs them")
    common = """\
  reg rst_q = 1'b1;
  always @(posedge clk) rst_q <= reset;
"""
    if uart:
        return f"""\
module {_WRAPPER_MODULE}(input clk, input reset, input rx, output tx, output busy);
{common}  reg rx_q = 1'b1;
  always @(posedge clk) rx_q <= rx;
  {_DEVICE_MODULE} dut(.clk(clk), .rst(rst_q), .rx(rx_q), .tx(tx), .busy(busy));
endmodule
"""
    return f"""\
module {_WRAPPER_MODULE}(
  input clk, input reset,
  input feed_valid, input [7:0] feed_payload, output feed_ready,
  output reg out_valid, output reg [7:0] out_payload, input out_hold,
  output feed_empty, output busy, output rest);
{common}  reg [7:0] q0 = 8'h00, q1 = 8'h00;
  reg [1:0] n = 2'd0;
  reg hold_q = 1'b0;
  wire dev_ready, dev_valid, dev_rest;
  wire [7:0] dev_payload;
  wire take = (n != 2'd0) & dev_ready;
  wire put = feed_valid & (n != 2'd2);
  assign feed_ready = n != 2'd2;
  assign feed_empty = n == 2'd0;
  always @(posedge clk) begin
    hold_q <= out_hold;
    out_valid <= dev_valid & ~hold_q;
    out_payload <= dev_payload;
    if (rst_q) begin
      n <= 2'd0;
    end else begin
      case ({{put, take}})
        2'b10: begin
          if (n == 2'd0) q0 <= feed_payload; else q1 <= feed_payload;
          n <= n + 2'd1;
        end
        2'b01: begin
          q0 <= q1;
          n <= n - 2'd1;
        end
        2'b11: begin
          if (n == 2'd1) q0 <= feed_payload;
          else begin q0 <= q1; q1 <= feed_payload; end
        end
        default: ;
      endcase
    end
  end
  {_DEVICE_MODULE} dut(.clk(clk), .rst(rst_q),
    .i_stream__payload(q0), .i_stream__valid(n != 2'd0), .i_stream__ready(dev_ready),
    .o_stream__payload(dev_payload), .o_stream__valid(dev_valid), .o_stream__ready(~hold_q),
    .busy(busy), .rest(dev_rest));
  // At rest with nothing in the FIFO and no byte captured, the next cycles change nothing.
  assign rest = dev_rest & (n == 2'd0) & ~out_valid & ~rst_q;
endmodule
"""
