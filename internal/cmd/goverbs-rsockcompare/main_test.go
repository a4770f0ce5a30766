package main

import (
	"strings"
	"testing"
)

// Result lines as rstream (rdma-core 44.0) and goverbs-rsockstream print
// them.
func TestParseResult(t *testing.T) {
	const head = "name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n"
	for _, c := range []struct {
		out  string
		size int
		usec float64
	}{
		{head + "custom    64      1       10k     1.2m        0.61s      0.02      30.18\n", 64, 30.18},
		{head + "custom    64k     400     1       50m         0.86s      0.49    1065.66\n", 65536, 1065.66},
		{head + "custom    1m      30      1       60m         0.88s      0.57   14594.15\n", 1 << 20, 14594.15},
		{"name      bytes    xfers    iters    total              time     Gb/sec    usec/xfer\n" +
			"custom    1048576  20       1        41943040      0.600372s       0.56    15009.304\n", 1 << 20, 15009.304},
	} {
		usec, _, err := parseResult(c.out, c.size)
		if err != nil || usec != c.usec {
			t.Errorf("%q: %v, %v; want %v", c.out, usec, err, c.usec)
		}
	}
	// A run whose line is missing, cut short, of another size, or whose
	// time is not a positive number fails the comparison.
	for _, c := range []struct{ out, want string }{
		{"rconnect: Connection refused\n", "no result line"},
		{head, "no result line"},
		{head + "custom    64      1       10k     1.2m        0.61s      0.02\n", "7 columns"},
		{head + "custom    64k     1       10k     1.2m        0.61s      0.02      30.18\n", "bytes 64k, want 64"},
		{head + "custom    64      1       10k     1.2m        0.00s      inf       0.00\n", "not a positive number"},
		{head + "custom    64      1       10k     1.2m        0.61s      0.02      -nan\n", "not a positive number"},
	} {
		if _, _, err := parseResult(c.out, 64); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want an error saying %q", c.out, err, c.want)
		}
	}
}

// sizeStr writes sizes as rstream's size_str does.
func TestSizeStr(t *testing.T) {
	for n, want := range map[int]string{64: "64", 1000: "1000", 1024: "1k", 1536: "1.5k", 65536: "64k", 98304: "96k", 1 << 20: "1m", 1<<20 + 1<<19: "1.5m", 1 << 30: "1g"} {
		if got := sizeStr(n); got != want {
			t.Errorf("sizeStr(%d) = %q, want %q", n, got, want)
		}
	}
}

// The table gives each cell's spread and Go's median over each other
// column's; a cell without runs prints "-", not NaN.
func TestTable(t *testing.T) {
	o := options{reps: 3, cols: []column{columns[0], columns[1], columns[3]}}
	rows := []row{
		{name: "64 B round trip, us", lat: true, size: 64, results: map[string][]float64{
			"go": {90, 80, 100}, "c-block": {60, 40, 50}, "tcp-c": {20, 20, 20}}},
		{name: "64 KiB throughput, Gb/s", size: 65536, results: map[string][]float64{
			"go": {0.4, 0.5, 0.45}, "c-block": {0.5, 0.5, 0.5}}},
	}
	var b strings.Builder
	printTable(&b, o, rows)
	for _, want := range []string{
		"| min / median / max of 3 runs | Go rsocket | C rsocket, blocking | TCP, C |",
		"| 64 B round trip, us | 80.0 / **90.0** / 100 | 40.0 / **50.0** / 60.0 | 20.0 / **20.0** / 20.0 |",
		"| 64 KiB throughput, Gb/s | 0.400 / **0.450** / 0.500 | 0.500 / **0.500** / 0.500 | - / **-** / - |",
		"| 64 B round trip (below 1: Go is faster) | 1.80 | 4.50 |",
		"| 64 KiB throughput (above 1: Go is faster) | 0.90 | - |",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// -insns-report's regions: rstream's binary is one; goverbs-rsockstream's
// splits the Go runtime from the rest.
func TestInsnsBinary(t *testing.T) {
	for _, c := range []struct{ tool, fn, want string }{
		{insnsC, "main", "rstream"},
		{insnsC, "", "rstream"},
		{insnsGo, "runtime.cgocall", "rsockstream: Go runtime"},
		{insnsGo, "internal/runtime/syscall.Syscall6", "rsockstream: Go runtime"},
		{insnsGo, "github.com/goverbs/goverbs/rsocket.(*Conn).Read", "rsockstream: the rest"},
		{insnsGo, "_cgo_0b49d6ed4a0b_Cfunc_ibv_poll_cq", "rsockstream: the rest"},
	} {
		if got := insnsBinary(c.tool, c.fn); got != c.want {
			t.Errorf("insnsBinary(%q, %q) = %q, want %q", c.tool, c.fn, got, c.want)
		}
	}
}
