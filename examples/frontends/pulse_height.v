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
// when it falls below, it sends the peak on channel 0, the width in cycles on channel 1 and an
// event on channel 2, all or none: a result that finds either of the first two channels still
// holding the previous one, or the event queue full, is counted in `lost`.
//
// Channel 2 is an event channel (pulse_height.toml: event_id_bits = 12): each pulse is one event,
// its id the peak and its time `time_ns` (the PTP time in ns) in the cycle the signal first
// reached the threshold, as six 16-bit words (ethdaq.host.events, docs/frontends.md):
//   word 0   1 000 pppp pppp pppp    the marker (an event's first word) and the 12-bit peak
//   word 1   0 000 0000 000t tttt    time bits 63..60
//   word 2   0 ttt tttt tttt tttt    time bits 59..45, then 44..30, 29..15, 14..0 in words 3 to 5
// Events wait in a queue of EVENT_DEPTH while their words go out, one per accepted cycle.
//
// pulse_height_model.py is the same thing in Python, for the tests. `discriminator` is high
// while the signal is at or above `threshold` (one cycle late); pulse_height.toml puts it on a
// Digilent Arty's Pmod JB (untested on hardware).
module pulse_height (
    input  wire        clk,
    input  wire        rst,
    input  wire [63:0] time_ns,       // PTP time of day in ns
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
    output wire [15:0] events,        // channel 2: events (marker, peak, threshold-crossing time)
    output wire        events_valid,
    input  wire        events_ready,
    output wire        discriminator  // signal at or above threshold (registered)
);
    localparam [31:0] SEED = 32'h12345678;
    localparam        EVENT_DEPTH = 8;      // Events queued for channel 2 (a power of 2).
    localparam        EVENT_WORDS = 6;

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
    reg [63:0] crossed;                     // time_ns when the signal reached the threshold
    wire       event_full;
    wire       busy = (height_valid && !height_ready) || (width_valid && !width_ready) || event_full;
    wire       send = !(x >= threshold) && in_pulse && !busy;
    assign discriminator = in_pulse;

    // Channel 2: the event queue ({peak, time}) and the word of its oldest event being sent.
    reg [75:0] queue [0:EVENT_DEPTH-1];
    reg [$clog2(EVENT_DEPTH):0] wr, rd;     // One bit more than the index: full and empty differ.
    reg [2:0]  word;
    wire [75:0] head = queue[rd[$clog2(EVENT_DEPTH)-1:0]];
    wire [63:0] t    = head[63:0];
    assign event_full  = (wr - rd) == EVENT_DEPTH;
    assign events_valid = wr != rd;
    assign events = (word == 3'd0) ? {1'b1, 3'd0, head[75:64]} :
                   (word == 3'd1) ? {1'b0, 11'd0, t[63:60]} :
                   (word == 3'd2) ? {1'b0, t[59:45]} :
                   (word == 3'd3) ? {1'b0, t[44:30]} :
                   (word == 3'd4) ? {1'b0, t[29:15]} :
                                    {1'b0, t[14:0]};

    always @(posedge clk) begin
        if (rst) begin
            wr <= 0; rd <= 0; word <= 3'd0;
        end else begin
            if (send) begin
                queue[wr[$clog2(EVENT_DEPTH)-1:0]] <= {peak, crossed};
                wr <= wr + 1'b1;
            end
            if (events_valid && events_ready) begin
                if (word == EVENT_WORDS - 1) begin
                    word <= 3'd0;
                    rd   <= rd + 1'b1;
                end else begin
                    word <= word + 3'd1;
                end
            end
        end
    end

    always @(posedge clk) begin
        if (rst) begin
            rng <= SEED; x <= 12'd0;
            in_pulse <= 1'b0; peak <= 12'd0; cycles <= 16'd0; crossed <= 64'd0;
            pulses <= 32'd0; lost <= 32'd0;
            height <= 16'd0; height_valid <= 1'b0; width <= 16'd0; width_valid <= 1'b0;
        end else begin
            rng <= rng_next;
            x   <= x_next;
            if (height_valid && height_ready) height_valid <= 1'b0;
            if (width_valid && width_ready)   width_valid  <= 1'b0;
            if (x >= threshold) begin
                in_pulse <= 1'b1;
                if (!in_pulse) crossed <= time_ns;
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
