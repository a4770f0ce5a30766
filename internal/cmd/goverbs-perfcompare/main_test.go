package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Result rows as perftest 4.5 prints them (ib_send_bw and ib_send_lat on
// rxe0 under TCG).
func TestParseResult(t *testing.T) {
	bw := " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 4096       200              0.00               53.84  \t\t   0.013783\n"
	r, err := parseResult("ib_send_bw", bw, false)
	if err != nil || r.msgRate != 13783 || r.mbps != 53.84 {
		t.Errorf("bandwidth row: %+v, %v", r, err)
	}
	lat := " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n" +
		" 4096    200          47.06          44180.10      1862.57  \t       2000.00     \t-nan\t\t26877.19 \t\t44180.10\n"
	r, err = parseResult("ib_send_lat", lat, true)
	if err != nil || r.msgRate != 1e6/1862.57 || r.p99 != 26877.19 || r.max != 44180.10 {
		t.Errorf("latency row: %+v, %v", r, err)
	}
	if _, err := parseResult("ib_send_bw", "Couldn't connect\n", false); err == nil {
		t.Error("no result row: want an error")
	}
	// A rate that is not a positive number would make the ratios NaN or
	// Inf: the error names the tool and the row.
	bwHead, latHead := strings.Split(bw, "\n")[0]+"\n", strings.Split(lat, "\n")[0]+"\n"
	for _, c := range []struct {
		lat bool
		row string
	}{
		{false, " 4096 200 0.00 0.00 0.000000"},
		{false, " 4096 200 0.00 53.84 nan"},
		{false, " 4096 200 0.00 53.84 -nan"},
		{false, " 4096 200 0.00 53.84 inf"},
		{false, " 4096 200 0.00 53.84 -0.5"},
		{false, " 4096 200 0.00 nan 0.013783"},
		{true, " 4096 200 47.06 44180.10 0.00 2000.00 -nan 26877.19 44180.10"},
		{true, " 4096 200 47.06 44180.10 nan 2000.00 -nan 26877.19 44180.10"},
		{true, " 4096 200 47.06 44180.10 1862.57 2000.00 -nan inf 44180.10"},
		{true, " 4096 200 47.06 -nan 1862.57 2000.00 -nan 26877.19 44180.10"},
	} {
		head := map[bool]string{false: bwHead, true: latHead}[c.lat]
		r, err := parseResult("goverbs-perf", head+c.row+"\n", c.lat)
		if err == nil || !strings.Contains(err.Error(), "goverbs-perf") || !strings.Contains(err.Error(), c.row) {
			t.Errorf("row %q: %+v, %v; want an error naming goverbs-perf and the row", c.row, r, err)
		}
	}
}

// No ratio prints as NaN or Inf: where a median is 0 (no runs, a zero
// latency tail) the table says "-".
func TestTableNoNaN(t *testing.T) {
	rows := []row{
		{mode: "send_bw", size: 64, iters: 2},
		{mode: "send_lat", size: 64, iters: 2, c: []result{{msgRate: 10}}, g: []result{{msgRate: 5, p99: 3, max: 4}}},
	}
	var b strings.Builder
	printTable(&b, rows)
	if out := b.String(); strings.Contains(strings.ToLower(out), "nan") || strings.Contains(strings.ToLower(out), "inf") ||
		!strings.Contains(out, "perf send_bw 64 0 0 -\n") || !strings.Contains(out, "perf send_lat 64 10 5 0.50\n") {
		t.Errorf("table:\n%s", out)
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want spread
	}{
		{[]float64{5, 1, 3}, spread{1, 3, 5}},
		{[]float64{4, 1, 3, 2}, spread{1, 2.5, 4}},
		{[]float64{7}, spread{7, 7, 7}},
		{nil, spread{}},
	} {
		if got := spreadOf(c.in); got != c.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// The ratio is of the medians, not of the best runs: one lucky Go run does
// not move it.
func TestTableMedians(t *testing.T) {
	rs := func(rates ...float64) []result {
		var out []result
		for _, r := range rates {
			out = append(out, result{msgRate: r, p99: 1e6 / r * 2, max: 1e6 / r * 10, switches: 2000 / r})
		}
		return out
	}
	rows := []row{
		{mode: "send_bw", size: 64, iters: 2, c: rs(100, 90, 110, 100, 95), g: rs(80, 200, 85, 90, 70)},
		{mode: "send_lat", size: 64, iters: 2, c: rs(10, 10, 10), g: rs(5, 5, 20)},
	}
	if got := rows[0].ratio(); got != 85.0/100 {
		t.Errorf("send_bw ratio %v, want 0.85", got)
	}
	var b strings.Builder
	printTable(&b, rows)
	for _, want := range []string{
		"send_bw       64       90 /      100 /      110       70 /       85 /      200   0.85",
		"send_lat      64 ",
		"perf send_bw 64 100 85 0.85",
		"send_bw       64   10.000   11.765   +1.765",
		"perf send_lat 64 10 5 0.50",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestParseCtxt(t *testing.T) {
	n, err := parseCtxt("cpu  1 2 3\nintr 5 0\nctxt 123456\nbtime 1\n")
	if err != nil || n != 123456 {
		t.Errorf("parseCtxt = %d, %v; want 123456", n, err)
	}
	if _, err := parseCtxt("cpu 1\n"); err == nil {
		t.Error("no ctxt line: want an error")
	}
	if n, err := contextSwitches(); err != nil || n == 0 {
		t.Errorf("contextSwitches on this machine = %d, %v", n, err)
	}
}

func TestCheckLoopAllocs(t *testing.T) {
	if err := checkLoopAllocs("row\n heap allocations in the timed loop: 0 (and 7 by the Go runtime alone)\n"); err != nil {
		t.Errorf("0 allocations: %v", err)
	}
	if err := checkLoopAllocs(" heap allocations in the timed loop: 3 (and 0 by the Go runtime alone)\n"); err == nil || !strings.Contains(err.Error(), "allocated 3 times") {
		t.Errorf("3 allocations: %v", err)
	}
	if err := checkLoopAllocs("no such line\n"); err == nil {
		t.Error("no line: want an error")
	}
}

func TestIters(t *testing.T) {
	o := options{bwIters: 20000, latIters: 5000, maxBytes: 128 << 20}
	for _, c := range []struct {
		mode string
		size int
		want int
	}{
		{"write_bw", 64, 20000},
		{"write_bw", 4096, 20000},
		{"write_bw", 65536, 2048},
		{"send_lat", 64, 5000},
		{"send_lat", 65536, 2048},
		{"send_bw", 1 << 30, 1},
	} {
		if got := o.iters(c.mode, c.size); got != c.want {
			t.Errorf("%s %d: %d iterations, want %d", c.mode, c.size, got, c.want)
		}
	}
}

// Both tools get the same run; goverbs-perf also its mode and loop, and
// -spin, -wait, -wait-min and -sysmon-nap only when asked for; -events gives both -e;
// -insns gives perftest's bandwidth runs -N; -gomaxprocs and -lock-thread
// go to goverbs-perf only.
func TestToolArgs(t *testing.T) {
	o := options{device: "rxe0", gid: "1", loop: "go"}
	c, g := o.toolArgs("c", "send_bw", 64, 100), o.toolArgs("go", "send_bw", 64, 100)
	if want := []string{"-F", "-d", "rxe0", "-x", "1", "-s", "64", "-n", "100"}; !slices.Equal(c, want) {
		t.Errorf("perftest's arguments %q, want %q", c, want)
	}
	if want := []string{"-d", "rxe0", "-x", "1", "-s", "64", "-n", "100", "-t", "send_bw", "-loop", "go"}; !slices.Equal(g, want) {
		t.Errorf("goverbs-perf's arguments %q, want %q", g, want)
	}
	o.spin, o.events = 4, true
	c, g = o.toolArgs("c", "send_lat", 2, 5), o.toolArgs("go", "send_lat", 2, 5)
	if !slices.Contains(c, "-e") || !slices.Contains(g, "-e") {
		t.Errorf("-events: %q and %q, want -e in both", c, g)
	}
	if i := slices.Index(g, "-spin"); i < 0 || i+1 == len(g) || g[i+1] != "4" || slices.Contains(c, "-spin") {
		t.Errorf("-spin 4: %q and %q, want it for goverbs-perf only", c, g)
	}
	if slices.Contains(g, "-sysmon-nap") || slices.Contains(g, "-wait") || slices.Contains(g, "-wait-min") {
		t.Errorf("goverbs-perf's arguments %q have -sysmon-nap, -wait or -wait-min, which were not asked for", g)
	}
	o.waitMin = 1
	goverbsPerfOnly(t, o, "-wait-min", "1")
	o.waitMin = 0
	o.insns = "insns"
	if c := o.toolArgs("c", "send_bw", 64, 5); !slices.Contains(c, "-N") {
		t.Errorf("-insns: perftest's bandwidth arguments %q, want -N (no peak search to count)", c)
	}
	if c := o.toolArgs("c", "send_lat", 64, 5); slices.Contains(c, "-N") {
		t.Errorf("-insns: perftest's latency arguments %q have -N, a bandwidth option", c)
	}
	if g := o.toolArgs("go", "send_bw", 64, 5); slices.Contains(g, "-N") {
		t.Errorf("-insns: goverbs-perf's arguments %q have -N", g)
	}
	o.insns = ""
	if g := o.toolArgs("go", "send_bw", 64, 5); slices.Contains(g, "-gomaxprocs") {
		t.Errorf("goverbs-perf's arguments %q have -gomaxprocs, which was not asked for", g)
	}
	o.gomaxprocs = 2
	goverbsPerfOnly(t, o, "-gomaxprocs", "2")
	o.gomaxprocs = 0
	if g := o.toolArgs("go", "send_bw", 64, 5); slices.Contains(g, "-lock-thread") {
		t.Errorf("goverbs-perf's arguments %q have -lock-thread, which was not asked for", g)
	}
	o.lockThread = true
	if c, g := o.toolArgs("c", "send_bw", 64, 5), o.toolArgs("go", "send_bw", 64, 5); !slices.Contains(g, "-lock-thread") || slices.Contains(c, "-lock-thread") {
		t.Errorf("-lock-thread: %q and %q, want it for goverbs-perf only", c, g)
	}
	o.lockThread = false
	o.sysmonNap, o.wait = true, "netpoll"
	c, g = o.toolArgs("c", "send_bw", 64, 5), o.toolArgs("go", "send_bw", 64, 5)
	if !slices.Contains(g, "-sysmon-nap") || slices.Contains(c, "-sysmon-nap") {
		t.Errorf("-sysmon-nap: %q and %q, want it for goverbs-perf only", c, g)
	}
	goverbsPerfOnly(t, o, "-wait", "netpoll")
}

// A client that fails at once ends the pair at once, the server killed
// (it would wait for its client until pair's 3-minute bound), with the
// client's error.
func TestPairClientFails(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeToolEnv, "1")
	start := time.Now()
	_, err = pair("write_bw", exe, fakeAddr, []string{"-t", "write_bw"}, sideArgs{client: []string{"-fake-fail"}}, freePorts(t, 1), "")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("pair took %v", took)
	}
	if err == nil || !strings.Contains(err.Error(), "client: exit status 1") || !strings.Contains(err.Error(), "the client fails at once") {
		t.Errorf("pair: %v, want the client's error", err)
	}
}

// goverbsPerfOnly checks that o gives goverbs-perf flag with value, and
// perftest not flag.
func goverbsPerfOnly(t *testing.T, o options, flag, value string) {
	t.Helper()
	c, g := o.toolArgs("c", "send_bw", 64, 5), o.toolArgs("go", "send_bw", 64, 5)
	if i := slices.Index(g, flag); i < 0 || i+1 == len(g) || g[i+1] != value || slices.Contains(c, flag) {
		t.Errorf("%s %s: %q and %q, want it for goverbs-perf only", flag, value, c, g)
	}
}
