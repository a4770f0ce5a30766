package main

import "testing"

// Result rows as perftest 4.5 prints them (ib_send_bw and ib_send_lat on
// rxe0 under TCG).
func TestParseResult(t *testing.T) {
	bw := " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 4096       200              0.00               53.84  \t\t   0.013783\n"
	r, err := parseResult(bw, false)
	if err != nil || r.msgRate != 13783 || r.mbps != 53.84 {
		t.Errorf("bandwidth row: %+v, %v", r, err)
	}
	lat := " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n" +
		" 4096    200          47.06          44180.10      1862.57  \t       2000.00     \t-nan\t\t26877.19 \t\t44180.10\n"
	r, err = parseResult(lat, true)
	if err != nil || r.msgRate != 1e6/1862.57 {
		t.Errorf("latency row: %+v, %v", r, err)
	}
	if _, err := parseResult("Couldn't connect\n", false); err == nil {
		t.Error("no result row: want an error")
	}
}
