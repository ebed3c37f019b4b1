// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// Simulation only (Verilator): frames injected byte for byte at the simulated board's GMII
// receive pins, beside the frames LiteX's C model (gmii_ethernet) brings from the Linux tap
// (gateware/simphy.py). The C model always sends a good preamble and a good FCS; a test that needs
// a bad FCS, a bad preamble or SFD, an exact runt or rx_er writes them here.
//
// Every POLL_CYCLES, unless it is still playing the last one, it reads the file `inject` in the
// simulation's working directory (text, whitespace-separated):
//
//     SEQ N  L1 b b b ...  L2 b b ...  ...  LN b ...
//
// SEQ a sequence number (decimal, 0 to 2^31-1), N the number of frames, then each frame: its byte
// count L (decimal) and L bytes in hex: everything that goes on the pins with rx_dv high, preamble
// and SFD included, FCS included. A negative L is a frame of -L bytes sent with rx_er high on
// every byte. A file whose SEQ is the last one played is not played again. After the N frames
// (each followed by at least IFG idle cycles) it writes "SEQ N\n" to the file `inject.done`; a file
// it cannot read whole, or too big for MAX_BYTES, MAX_FRAMES and MAX_FRAME, is not played: it
// writes "SEQ error\n" instead and says why on the console.
//
// The tap's frames are never lost, cut or mixed with injected ones: each frame on the output is
// either a whole tap frame or a whole injected one, with at least IFG idle cycles between any two.
// A tap frame that arrives while the output is idle (IFG cycles since the last frame, nothing
// waiting) goes through at once, unchanged and undelayed; otherwise it waits, whole, in a FIFO of
// 2^FIFO_BITS bytes (waiting tap frames go before injected ones). The C model (ethdaq_gmii) sends
// tap frames at most at the wire's rate, IFG idle cycles apart, so they wait only behind an
// injected frame and never more than its bytes and a gap: with MAX_FRAME under the FIFO's size it
// cannot overflow. Should it (a C model faster than the wire), the simulation stops with a
// message: nothing is dropped silently.
module ethdaq_sim_inject #(
    parameter POLL_CYCLES = 131072,
    parameter IFG         = 12,
    parameter FIFO_BITS   = 14,
    parameter MAX_BYTES   = 1048576,
    parameter MAX_FRAMES  = 4096,
    parameter MAX_FRAME   = (1 << FIFO_BITS) - 2*IFG   // Bytes of an injected frame at most.
) (
    input  wire       clk,
    // From the C model.
    input  wire [7:0] rx_data_i,
    input  wire       rx_dv_i,
    input  wire       rx_er_i,
    // To the MAC (through the cable).
    output reg  [7:0] rx_data_o,
    output reg        rx_dv_o,
    output reg        rx_er_o
);
    localparam IDLE = 2'd0, PASS = 2'd1, TAP = 2'd2, INJ = 2'd3;
    localparam DEPTH = 1 << FIFO_BITS;

    // Output side.
    reg [1:0]  mode = IDLE;
    reg [15:0] gap  = IFG;   // Idle cycles on the output since its last frame (saturates at IFG).
    reg        dv_prev = 1'b0;

    // Tap frames waiting: {start of frame, rx_er, rx_data}.
    reg [9:0]       fifo [0:DEPTH-1];
    reg [FIFO_BITS:0] wp = 0, rp = 0;
    wire            empty = (wp == rp);
    wire            full  = (wp[FIFO_BITS] != rp[FIFO_BITS]) && (wp[FIFO_BITS-1:0] == rp[FIFO_BITS-1:0]);
    wire [9:0]      head  = fifo[rp[FIFO_BITS-1:0]];

    // Injected frames, as read from the file.
    reg [7:0]  inj_mem [0:MAX_BYTES-1];
    reg [31:0] inj_len [0:MAX_FRAMES-1];
    reg        inj_err [0:MAX_FRAMES-1];
    reg        active   = 1'b0;   // Frames to play (or their done file to write).
    reg [31:0] n_frames = 0, frame = 0, pos = 0, rem = 0;
    reg [31:0] seq = 0, last_seq = 0;
    reg        played_any = 1'b0, bad_said = 1'b0;

    wire sof        = rx_dv_i & ~dv_prev;
    wire can_start  = (mode == IDLE) && (gap >= IFG);
    wire start_tap  = can_start && !empty;
    wire start_pass = can_start && empty && sof;
    wire start_inj  = can_start && empty && !sof && active && (frame < n_frames);
    wire tap_more   = !empty && !head[9];
    wire passing    = start_pass || (mode == PASS && rx_dv_i);
    wire [7:0] inj_byte = inj_mem[pos];
    wire       inj_er   = inj_err[frame];

    always @(*) begin
        rx_dv_o   = 1'b0;
        rx_er_o   = 1'b0;
        rx_data_o = 8'd0;
        if (passing) begin
            rx_dv_o = 1'b1; rx_er_o = rx_er_i; rx_data_o = rx_data_i;
        end else if (start_tap || (mode == TAP && tap_more)) begin
            rx_dv_o = 1'b1; rx_er_o = head[8]; rx_data_o = head[7:0];
        end else if (start_inj || (mode == INJ && rem != 0)) begin
            rx_dv_o = 1'b1; rx_er_o = inj_er; rx_data_o = inj_byte;
        end
    end

    // File reading (blocking: all in one cycle).
    reg [31:0] count = 0;
    integer fd, fo, r, s, nf, l, i, j, total, b;
    reg ok;

    always @(posedge clk) begin
        dv_prev <= rx_dv_i;

        // Tap frames not going through at once wait in the FIFO.
        if (rx_dv_i && !passing) begin
            if (full) begin
                $display("ethdaq_sim_inject: FIFO of %0d bytes for the tap's frames overflowed (the tap's C model sends faster than the wire carries frames): stopping, not dropping", DEPTH);
                $fflush();
                $finish;
            end
            fifo[wp[FIFO_BITS-1:0]] <= {sof, rx_er_i, rx_data_i};
            wp <= wp + 1;
        end

        case (mode)
            IDLE: begin
                if (start_tap) begin
                    rp   <= rp + 1;
                    mode <= TAP;
                end else if (start_pass) begin
                    mode <= PASS;
                end else if (start_inj) begin
                    pos  <= pos + 1;
                    rem  <= inj_len[frame] - 1;
                    mode <= INJ;
                end else if (gap < IFG) begin
                    gap <= gap + 1;
                end
                if (can_start && active && frame == n_frames) begin
                    // The last injected frame and its gap are out.
                    fo = $fopen("inject.done", "w");
                    if (fo != 0) begin
                        $fwrite(fo, "%0d %0d\n", seq, n_frames);
                        $fclose(fo);
                    end
                    active <= 1'b0;
                end
            end
            PASS: if (!rx_dv_i) begin
                mode <= IDLE; gap <= 1;
            end
            TAP: if (tap_more) begin
                rp <= rp + 1;
            end else begin
                mode <= IDLE; gap <= 1;
            end
            INJ: if (rem != 0) begin
                pos <= pos + 1;
                rem <= rem - 1;
            end else begin
                mode  <= IDLE; gap <= 1;
                frame <= frame + 1;
            end
        endcase

        if (count == POLL_CYCLES - 1) begin
            count <= 0;
            if (!active) begin
                fd = $fopen("inject", "r");
                if (fd != 0) begin
                    r = $fscanf(fd, "%d", s);
                    if (r != 1 || s < 0) begin
                        if (!bad_said)
                            $display("ethdaq_sim_inject: the file inject does not start with a sequence number: not played");
                        bad_said = 1'b1;
                    end else if (!played_any || s != last_seq) begin
                        bad_said = 1'b0;
                        played_any = 1'b1;
                        last_seq = s;
                        ok = 1'b1;
                        total = 0;
                        r = $fscanf(fd, "%d", nf);
                        if (r != 1 || nf < 0 || nf > MAX_FRAMES) begin
                            ok = 1'b0;
                            $display("ethdaq_sim_inject: inject %0d: no frame count, or more than %0d frames: not played", s, MAX_FRAMES);
                        end
                        for (i = 0; ok && i < nf; i = i + 1) begin
                            r = $fscanf(fd, "%d", l);
                            if (r != 1 || l == 0) begin
                                ok = 1'b0;
                                $display("ethdaq_sim_inject: inject %0d: frame %0d has no length: not played", s, i);
                            end else begin
                                inj_err[i] = (l < 0);
                                if (l < 0) l = -l;
                                if (l > MAX_FRAME) begin
                                    ok = 1'b0;
                                    $display("ethdaq_sim_inject: inject %0d: frame %0d has %0d bytes, more than %0d: not played", s, i, l, MAX_FRAME);
                                end else if (total + l > MAX_BYTES) begin
                                    ok = 1'b0;
                                    $display("ethdaq_sim_inject: inject %0d: more than %0d bytes: not played", s, MAX_BYTES);
                                end else begin
                                    inj_len[i] = l;
                                    for (j = 0; ok && j < l; j = j + 1) begin
                                        r = $fscanf(fd, "%h", b);
                                        if (r != 1 || b < 0 || b > 255) begin
                                            ok = 1'b0;
                                            $display("ethdaq_sim_inject: inject %0d: frame %0d: byte %0d missing or not a byte: not played", s, i, j);
                                        end else begin
                                            inj_mem[total + j] = b[7:0];
                                        end
                                    end
                                    total = total + l;
                                end
                            end
                        end
                        if (ok) begin
                            seq      <= s;
                            n_frames <= nf;
                            frame    <= 0;
                            pos      <= 0;
                            active   <= 1'b1;
                        end else begin
                            $fflush();
                            fo = $fopen("inject.done", "w");
                            if (fo != 0) begin
                                $fwrite(fo, "%0d error\n", s);
                                $fclose(fo);
                            end
                        end
                    end
                    $fclose(fd);
                end
            end
        end else begin
            count <= count + 1;
        end
    end
endmodule
