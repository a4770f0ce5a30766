package main

import (
	"os"
	"strings"
	"testing"
)

// Two passes of one boot, as make perf-compare prints them: the same mode
// and size in each pass are different rows.
const agreeLogA = `perf-compare: booting the soft-RoCE VM
== goverbs-perf -loop go
ran write_bw     64 B: 5 runs each, Go/C 0.96
perf write_bw 64 75000 72000 0.96
perf read_bw 64 60000 54600 0.91
== goverbs-perf -loop c
perf write_bw 64 75000 74250 0.99
`

func readRatiosOf(t *testing.T, log string) logRatios {
	t.Helper()
	l, err := readRatios(strings.NewReader(log))
	if err != nil {
		t.Fatalf("readRatios: %v", err)
	}
	return l
}

func TestReadRatios(t *testing.T) {
	l := readRatiosOf(t, agreeLogA)
	want := []logRow{
		{"goverbs-perf -loop go", "write_bw", 64},
		{"goverbs-perf -loop go", "read_bw", 64},
		{"goverbs-perf -loop c", "write_bw", 64},
	}
	if len(l.keys) != len(want) {
		t.Fatalf("keys %v, want %v", l.keys, want)
	}
	for i, k := range want {
		if l.keys[i] != k {
			t.Errorf("key %d: %v, want %v", i, l.keys[i], k)
		}
	}
	// The ratio of the medians, not the line's rounded one.
	if r := l.ratios[want[0]]; r != 72000.0/75000 {
		t.Errorf("write_bw 64 B, Go loop: %v, want 0.96", r)
	}
	if r := l.ratios[want[2]]; r != 0.99 {
		t.Errorf("write_bw 64 B, C loop: %v, want 0.99", r)
	}

	for _, c := range []struct{ log, want string }{
		{"== a\nperf write_bw 64 1 1 1.00\nperf write_bw 64 1 1 1.00\n", "line 3: write_bw 64 B (a) a second time"},
		{"perf write_bw 64 0 1 0.00\n", "line 1"},
		{"perf read_bw 64 NaN 100 NaN\n", "line 1"},
		{"perf read_bw 64 100 NaN NaN\n", "line 1"},
		{"perf read_bw 64 100 +Inf +Inf\n", "line 1"},
		{"perf read_bw 64 1e-320 1e300 +Inf\n", "line 1"},
		{"perf write_bw x 1 1 1.00\n", "line 1"},
		{"ran write_bw 64 B\n", "no perf lines"},
	} {
		_, err := readRatios(strings.NewReader(c.log))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one with %q", c.log, err, c.want)
		}
	}
}

func TestPrintAgreement(t *testing.T) {
	a := readRatiosOf(t, agreeLogA)
	// Run b: the Go loop's write_bw 3% lower, the rest the same.
	b := readRatiosOf(t, strings.Replace(agreeLogA, "75000 72000", "75000 69840", 1))
	var out strings.Builder
	if err := printAgreement(&out, []string{"a", "b"}, []logRatios{a, b}, 0.05); err != nil {
		t.Errorf("3%% apart, bound 5%%: %v", err)
	}
	if !strings.Contains(out.String(), "write_bw      64  0.960  0.931    3.1%") ||
		!strings.Contains(out.String(), "largest apart: 3.1%") {
		t.Errorf("output:\n%s", out.String())
	}
	out.Reset()
	err := printAgreement(&out, []string{"a", "b"}, []logRatios{a, b}, 0.02)
	if err == nil || !strings.Contains(err.Error(), "write_bw 64 B (goverbs-perf -loop go): 3.1% apart") ||
		strings.Contains(err.Error(), "read_bw") {
		t.Errorf("3%% apart, bound 2%%: %v", err)
	}

	// A row that one log lacks, either way round.
	c := readRatiosOf(t, strings.Replace(agreeLogA, "perf read_bw", "perf send_bw", 1))
	err = printAgreement(&out, []string{"a", "c"}, []logRatios{a, c}, 0.05)
	if err == nil || !strings.Contains(err.Error(), "read_bw 64 B (goverbs-perf -loop go): not in c") ||
		!strings.Contains(err.Error(), "send_bw 64 B (goverbs-perf -loop go): only in c") {
		t.Errorf("a row missing: %v", err)
	}
}

// The reviewer's: a log whose medians are NaN agreed with any other.
func TestAgreeRefusesNaN(t *testing.T) {
	dir := t.TempDir()
	a, b := dir+"/a.log", dir+"/b.log"
	if err := os.WriteFile(a, []byte("perf read_bw 64 NaN 100 NaN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("perf read_bw 64 100 100 1.00\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err := agree(&out, []string{a, b}, 0.05)
	if err == nil || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("agree(NaN log, good log): %v, want an error naming %s line 1\n%s", err, a, out.String())
	}
}
