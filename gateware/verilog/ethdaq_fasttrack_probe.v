// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// Simulation only (Verilator): the fast-track sink's deliveries against the simulated board's
// GMII receive pins, in clock cycles counted here (the GMII clock), independently of the design:
// "probe: fasttrack CYCLE rx-end RXEND rule R length L payload HEX" when the classifier's sink
// takes a datagram; RXEND is the cycle after the last byte (FCS) of the latest frame on the
// pins, as ethdaq_gmii_probe.v reports it; HEX is the first 8 payload bytes, byte 0 first.
module ethdaq_fasttrack_probe (
    input wire        clk,
    input wire        rx_dv,
    input wire        valid,
    input wire [3:0]  rule,
    input wire [15:0] length,
    input wire [63:0] payload
);
    reg [63:0] cycle = 0;
    reg [63:0] rx_end = 0;
    reg        dv_d = 0;
    integer    i;
    reg [63:0] hex;

    always @(posedge clk) begin
        cycle <= cycle + 1;
        dv_d <= rx_dv;
        if (dv_d && !rx_dv)
            rx_end <= cycle;
        if (valid) begin
            for (i = 0; i < 8; i = i + 1)
                hex[8*(7 - i) +: 8] = payload[8*i +: 8];
            $display("probe: fasttrack %0d rx-end %0d rule %0d length %0d payload %016x",
                     cycle, (dv_d && !rx_dv) ? cycle : rx_end, rule, length, hex);
            $fflush();
        end
    end
endmodule
