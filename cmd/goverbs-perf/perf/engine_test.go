package perf

import (
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
			e.tick()
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
