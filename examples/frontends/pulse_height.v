// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// A pulse-height analyser as a user's Verilog front-end:
//   ethdaq build|sim --frontend examples/frontends/pulse_height.v   (its ports: pulse_height.toml)
//
// The detector signal is a test pulser inside the module (there is no converter on the simulated
// board): pulses arrive at pseudo-random times (probability `rate` / 2^32 per clock cycle) with
// pseudo-random 12-bit amplitudes (the low bits; the high bits decide the arrival) and decay by a quarter every cycle, so close pulses pile up.
// While the signal is at or above `threshold` the analyser tracks its peak and counts the cycles;
// when it falls below, it sends the peak on channel 0 and the width in cycles on channel 1, both
// or neither: a result that finds either channel still holding the previous one is counted in
// `lost`. pulse_height_model.py is the same thing in Python, for the tests. `discriminator` is high
// while the signal is at or above `threshold` (one cycle late); pulse_height.toml puts it on a
// Digilent Arty's Pmod JB (untested on hardware).
module pulse_height (
    input  wire        clk,
    input  wire        rst,
    input  wire [11:0] threshold,
    input  wire [31:0] rate,
    output reg  [31:0] pulses,        // results sent
    output reg  [31:0] lost,          // results lost for a busy channel
    output reg  [15:0] height,        // channel 0: peak (12 bits)
    output reg         height_valid,
    input  wire        height_ready,
    output reg  [15:0] width,         // channel 1: cycles at or above threshold
    output reg         width_valid,
    input  wire        width_ready,
    output wire        discriminator  // signal at or above threshold (registered)
);
    localparam [31:0] SEED = 32'h12345678;

    // The test pulser: xorshift32, one step per cycle.
    reg  [31:0] rng;
    wire [31:0] a        = rng ^ (rng << 13);
    wire [31:0] b        = a ^ (a >> 17);
    wire [31:0] rng_next = b ^ (b << 5);
    reg  [11:0] x;
    wire [13:0] sum      = x - (x >> 2) + ((rng_next < rate) ? rng_next[11:0] : 12'd0);
    wire [11:0] x_next   = (sum > 14'd4095) ? 12'd4095 : sum[11:0];

    // The analyser.
    reg        in_pulse;
    reg [11:0] peak;
    reg [15:0] cycles;
    wire       busy = (height_valid && !height_ready) || (width_valid && !width_ready);
    assign discriminator = in_pulse;

    always @(posedge clk) begin
        if (rst) begin
            rng <= SEED; x <= 12'd0;
            in_pulse <= 1'b0; peak <= 12'd0; cycles <= 16'd0;
            pulses <= 32'd0; lost <= 32'd0;
            height <= 16'd0; height_valid <= 1'b0; width <= 16'd0; width_valid <= 1'b0;
        end else begin
            rng <= rng_next;
            x   <= x_next;
            if (height_valid && height_ready) height_valid <= 1'b0;
            if (width_valid && width_ready)   width_valid  <= 1'b0;
            if (x >= threshold) begin
                in_pulse <= 1'b1;
                if (x > peak) peak <= x;
                if (cycles != 16'hffff) cycles <= cycles + 16'd1;
            end else if (in_pulse) begin
                in_pulse <= 1'b0;
                peak     <= 12'd0;
                cycles   <= 16'd0;
                if (busy) begin
                    lost <= lost + 32'd1;
                end else begin
                    height <= {4'd0, peak}; height_valid <= 1'b1;
                    width  <= cycles;       width_valid  <= 1'b1;
                    pulses <= pulses + 32'd1;
                end
            end
        end
    end
endmodule
