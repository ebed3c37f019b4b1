// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// Simulation only (Verilator): the simulated board's Ethernet cable and its link partner, as a
// test sets them (gateware/simphy.py). Every POLL_CYCLES it reads the file `cable` in the
// simulation's working directory: "LINK SPEED DUPLEX", e.g. "0 1000 1" (unplugged) or
// "1 100 1" (plugged into a 100 Mb/s full-duplex port). Without the file, or with a line it cannot
// read, the cable stays as it was (at power-on: plugged, 1000 Mb/s full duplex). A partner that
// changes speed or duplex while the link is up renegotiates, as a real one does: the link drops
// for one poll period first.
module ethdaq_sim_cable #(
    parameter POLL_CYCLES = 131072
) (
    input  wire       clk,
    output reg        link = 1'b1,
    output reg  [1:0] speed = 2'd2,      // 0: 10, 1: 100, 2: 1000 Mb/s
    output reg        full_duplex = 1'b1
);
    reg [31:0] count = 0;
    integer fd, n, l, s, d;
    reg [1:0] code;  // s as a speed code

    always @(posedge clk) begin
        if (count == POLL_CYCLES - 1) begin
            count <= 0;
            fd = $fopen("cable", "r");
            if (fd != 0) begin
                n = $fscanf(fd, "%d %d %d", l, s, d);
                $fclose(fd);
                if (n == 3 && (s == 10 || s == 100 || s == 1000)) begin
                    code = (s == 1000) ? 2'd2 : (s == 100) ? 2'd1 : 2'd0;
                    if (link && l != 0 && (speed != code || full_duplex != (d != 0))) begin
                        link <= 1'b0;  // renegotiating: the new mode comes at the next poll
                    end else begin
                        link        <= (l != 0);
                        speed       <= code;
                        full_duplex <= (d != 0);
                    end
                end
            end
        end else begin
            count <= count + 1;
        end
    end
endmodule
