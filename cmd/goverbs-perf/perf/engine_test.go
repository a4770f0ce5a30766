package perf

import (
	"os"
	"testing"
	"time"
)

// tick yields at its first look at the clock, then not again until
// yieldPeriod has passed, looking once every yieldCheck calls.
func TestTickYields(t *testing.T) {
	defer func(y func()) { yield = y }(yield)
	yields := 0
	yield = func() { yields++ }

	var e engine
	ticks := func(n int) {
		for range n {
			e.tick(1)
		}
	}
	ticks(yieldCheck - 1)
	if yields != 0 {
		t.Fatalf("%d yields before the first look at the clock", yields)
	}
	ticks(1)
	if yields != 1 {
		t.Fatalf("%d yields at the first look, want 1", yields)
	}
	start := time.Now()
	ticks(10 * yieldCheck)
	if time.Since(start) < yieldPeriod && yields != 1 {
		t.Fatalf("%d yields within %v of the last, want none more", yields-1, yieldPeriod)
	}
	time.Sleep(yieldPeriod)
	ticks(yieldCheck)
	if yields < 2 {
		t.Fatalf("no yield %v after the last", yieldPeriod)
	}
}

// tick counts a spinning poll as its polls: one that may poll yieldCheck
// times looks at the clock every time.
func TestTickCountsSpins(t *testing.T) {
	defer func(y func()) { yield = y }(yield)
	yields := 0
	yield = func() { yields++ }

	var e engine
	e.tick(yieldCheck - 1)
	if yields != 0 {
		t.Fatalf("%d yields before yieldCheck polls", yields)
	}
	e.tick(2)
	if yields != 1 {
		t.Fatalf("%d yields once yieldCheck polls were passed, want 1", yields)
	}
	time.Sleep(yieldPeriod)
	e.tick(yieldCheck)
	if yields != 2 {
		t.Fatalf("%d yields after a spin of yieldCheck polls %v after the last yield, want 2", yields, yieldPeriod)
	}
}

// -lat-dump's file: one "start length" line per round trip, in order.
func TestWriteLatDump(t *testing.T) {
	path := t.TempDir() + "/trips"
	err := writeLatDump(path, []int64{1000, 5000}, []time.Duration{3000, 2500})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "1000 3000\n5000 2500\n"; got != want {
		t.Fatalf("dump %q, want %q", got, want)
	}
	if err := writeLatDump("", nil, []time.Duration{1}); err != nil {
		t.Fatalf("no path: %v, want nothing written and no error", err)
	}
	if err := writeLatDump(t.TempDir()+"/no/such/dir", []int64{1}, []time.Duration{1}); err == nil {
		t.Fatal("unwritable path: no error")
	}
}

// monotonicNanos is CLOCK_MONOTONIC, the clock perf stamps with -k
// CLOCK_MONOTONIC: it moves with Go's monotonic clock, and is not the wall
// clock.
func TestMonotonicNanos(t *testing.T) {
	t0, m0 := time.Now(), monotonicNanos()
	time.Sleep(20 * time.Millisecond)
	t1, m1 := time.Now(), monotonicNanos()
	if d, md := t1.Sub(t0), time.Duration(m1-m0); md < d-5*time.Millisecond || md > d+5*time.Millisecond {
		t.Fatalf("monotonicNanos moved %v while time.Now moved %v", md, d)
	}
	if wall := time.Now().UnixNano(); m1 > wall/2 {
		t.Fatalf("monotonicNanos %d looks like the wall clock (%d)", m1, wall)
	}
}
