"""The Verilog module the harness drives (sim.board.wrapper): the ports it needs, and the byte
stream through its two-entry FIFO under Icarus, against a stand-in device that takes bytes at
random."""

import pytest
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from support import run_icarus

from hwgen.toolchain import icarus_available
from sim.board import BoardError
from sim.board.wrapper import _DEVICE_MODULE, _WRAPPER_MODULE, _wrapper


def interface(**members):
    return wiring.Signature(members).create()


def test_a_device_without_the_link_ports_is_refused():
    with pytest.raises(BoardError, match=r"the device has no port\(s\) rx, tx; the simulated "
                                         "board needs them"):
        _wrapper(interface(busy=Out(1)), uart=True)
    with pytest.raises(BoardError, match="i_stream__payload, i_stream__ready, i_stream__valid"):
        _wrapper(interface(busy=Out(1), o_stream=Out(wiring.Signature(
            {"payload": Out(8), "valid": Out(1), "ready": In(1)}))), uart=False)


def test_uart_wrapper_registers_rx_and_reset():
    text = _wrapper(interface(rx=In(1), tx=Out(1), busy=Out(1)), uart=True)
    assert text.startswith(f"module {_WRAPPER_MODULE}(input clk, input reset, input rx, "
                           "output tx, output busy);")
    assert f"{_DEVICE_MODULE} dut(.clk(clk), .rst(rst_q), .rx(rx_q)" in text


# A device that takes a byte when a pseudo-random bit allows and answers it at once.
_LOOPBACK = """
module hwgen_device(input clk, input rst, input [7:0] i_stream__payload,
                    input i_stream__valid, output i_stream__ready,
                    output [7:0] o_stream__payload, output o_stream__valid,
                    input o_stream__ready, output busy, output rest);
  reg [15:0] lfsr = 16'hace1;
  always @(posedge clk) lfsr <= {lfsr[14:0], lfsr[15] ^ lfsr[13] ^ lfsr[12] ^ lfsr[10]};
  assign i_stream__ready = o_stream__ready & lfsr[0];
  assign o_stream__valid = i_stream__valid & lfsr[0];
  assign o_stream__payload = i_stream__payload;
  assign busy = 1'b0;
  assign rest = ~i_stream__valid;
endmodule
"""

_BENCH = """
module tb;
  reg clk = 0, reset = 1, feed_valid = 0, out_hold = 0;
  reg [7:0] feed_payload = 0;
  integer sent = 0, cycle = 0, seed = 7;
  wire feed_ready, out_valid, feed_empty, busy, rest;
  integer rested = 0;
  wire [7:0] out_payload;
  hwgen_board dut(.clk(clk), .reset(reset), .feed_valid(feed_valid),
                  .feed_payload(feed_payload), .feed_ready(feed_ready), .out_valid(out_valid),
                  .out_payload(out_payload), .out_hold(out_hold), .feed_empty(feed_empty),
                  .busy(busy), .rest(rest));
  always #5 clk = ~clk;
  always @(posedge clk) begin
    cycle <= cycle + 1;
    if (cycle == 3) reset <= 0;
    if (!reset && feed_valid && feed_ready) sent <= sent + 1;
    if (out_valid) $display("%0d", out_payload);
    // At rest only with the FIFO empty and no byte captured.
    if (rest && (!feed_empty || out_valid)) $display("rest too early");
    if (rest) rested <= rested + 1;
    if (cycle == 4000) begin
      $display("rested %0d", rested);
      $finish;
    end
  end
  always @(negedge clk) begin
    // Once the registered reset is over too, offer the next byte most of the time; hold the
    // output now and then.
    feed_valid <= cycle > 5 && sent < COUNT && ($random(seed) % 4 != 0);
    feed_payload <= sent[7:0];
    out_hold <= ($random(seed) % 5 == 0);
  end
endmodule
"""


def test_stream_wrapper_passes_every_byte_once_in_order(tmp_path):
    if not icarus_available():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed")
    stream = wiring.Signature({"payload": Out(8), "valid": Out(1), "ready": In(1)})
    wrapper = _wrapper(interface(i_stream=In(stream), o_stream=Out(stream), busy=Out(1),
                                 rest=Out(1)), uart=False)
    count = 600
    (tmp_path / "wrapper.v").write_text(wrapper)
    (tmp_path / "device.v").write_text(_LOOPBACK)
    (tmp_path / "tb.v").write_text(_BENCH.replace("COUNT", str(count)))
    out = run_icarus(tmp_path, [tmp_path / n for n in ("device.v", "wrapper.v", "tb.v")], "tb")
    got = [int(line) for line in out.splitlines() if line.isdigit()]
    assert got == [i % 256 for i in range(count)]
    assert "rest too early" not in out
    rested = int(out.split("rested ")[1].split()[0])
    assert rested > 4000 - 3 * count, "the wrapper never came to rest after the last byte"
