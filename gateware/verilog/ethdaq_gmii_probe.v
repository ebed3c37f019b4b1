// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// Simulation only (Verilator): reports on the console, in clock cycles, when a UDP/IPv4 frame to
// or from PORT crosses the simulated board's GMII pins. For request-to-reply latencies at the
// pins (bench/ctllatency.py): "probe: rx-end CYCLE" is the cycle after the last byte (FCS) of a
// frame received for PORT, "probe: tx-start CYCLE" the cycle of the first preamble byte of a
// frame the board sends from PORT. Byte offsets count from the first preamble byte: 8 preamble
// and SFD, 14 Ethernet header (EtherType at 20), 20 IPv4 header without options (protocol at 31),
// then UDP (source port at 42, destination port at 44).
module ethdaq_gmii_probe #(
    parameter PORT = 7000
) (
    input wire       clk,
    input wire       rx_dv,
    input wire [7:0] rx_data,
    input wire       tx_en,
    input wire [7:0] tx_data
);
    reg [63:0] cycle = 0;
    reg [15:0] rx_n = 0, tx_n = 0;
    reg        rx_match = 0, tx_match = 0;
    reg [63:0] tx_start = 0;
    reg [7:0]  rx_hi = 0, tx_hi = 0;

    always @(posedge clk) begin
        cycle <= cycle + 1;
        if (rx_dv) begin
            rx_n <= rx_n + 1;
            if (rx_n == 0) rx_match <= 1;
            if ((rx_n == 20 && rx_data != 8'h08) || (rx_n == 21 && rx_data != 8'h00) ||
                (rx_n == 31 && rx_data != 8'd17))
                rx_match <= 0;
            if (rx_n == 44) rx_hi <= rx_data;
            if (rx_n == 45 && {rx_hi, rx_data} != PORT) rx_match <= 0;
        end else begin
            if (rx_n > 45 && rx_match) begin
                $display("probe: rx-end %0d", cycle);
                $fflush();  // stdout is a pipe: the line must not wait in a buffer.
            end
            rx_n <= 0;
            rx_match <= 0;
        end
        if (tx_en) begin
            tx_n <= tx_n + 1;
            if (tx_n == 0) begin
                tx_match <= 1;
                tx_start <= cycle;
            end
            if ((tx_n == 20 && tx_data != 8'h08) || (tx_n == 21 && tx_data != 8'h00) ||
                (tx_n == 31 && tx_data != 8'd17))
                tx_match <= 0;
            if (tx_n == 42) tx_hi <= tx_data;
            if (tx_n == 43 && {tx_hi, tx_data} != PORT) tx_match <= 0;
            if (tx_n == 44 && tx_match) begin
                $display("probe: tx-start %0d", tx_start);
                $fflush();
            end
        end else begin
            tx_n <= 0;
            tx_match <= 0;
        end
    end
endmodule
