package perf

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// countYields replaces yield for the test and counts the calls.
func countYields(t *testing.T) *int {
	y := yield
	t.Cleanup(func() { yield = y })
	yields := new(int)
	yield = func() { *yields++ }
	return yields
}

// tick yields at its first look at the clock, then not again until
// yieldPeriod has passed; fast ticks take its stride between looks up to
// yieldCheck.
func TestTickYields(t *testing.T) {
	yields := countYields(t)
	var e engine
	e.tick(1)
	if *yields != 1 {
		t.Fatalf("%d yields at the first look, want 1", *yields)
	}
	start := time.Now()
	for range 100 * yieldCheck {
		e.tick(1)
	}
	if time.Since(start) < yieldPeriod && *yields != 1 {
		t.Fatalf("%d yields within %v of the last, want none more", *yields-1, yieldPeriod)
	}
	if e.stride != yieldCheck {
		t.Fatalf("stride %d after fast ticks, want %d", e.stride, yieldCheck)
	}
	time.Sleep(yieldPeriod)
	for range yieldCheck {
		e.tick(1)
	}
	if *yields < 2 {
		t.Fatalf("no yield within %d ticks %v after the last", yieldCheck, yieldPeriod)
	}
}

// A fast look after a late one doubles the stride no higher than
// yieldCheck: from a stride a late look scaled to 50, doubling went to
// 100, and the loop then looked at the clock less often than it should
// (found by the tick tests flaking on a loaded machine). Every branch of
// the look keeps the bound, whatever the clock says.
func TestTickStrideBound(t *testing.T) {
	countYields(t)
	for range 100 {
		e := engine{stride: 50, lastLook: time.Now(), lastYield: time.Now()}
		e.tick(50)
		if e.stride > yieldCheck {
			t.Fatalf("stride %d after a look from 50, above yieldCheck %d", e.stride, yieldCheck)
		}
	}
}

// Slow posts (a millisecond each, as 64 KiB ones under TCG) keep the
// stride down, so the yields still come about every yieldPeriod; with 64
// ticks between looks the loop would run 64 ms without one. A look that
// comes late scales the stride down at once.
func TestTickAdaptsToSlowPosts(t *testing.T) {
	yields := countYields(t)
	var e engine
	start := time.Now()
	for ticks := 0; ticks < 40 || time.Since(start) < 8*yieldPeriod; ticks++ {
		time.Sleep(time.Millisecond)
		e.tick(1)
	}
	if *yields < 5 {
		t.Fatalf("%d yields in %v of ticks a millisecond apart, want at least 5 (stride %d)", *yields, time.Since(start), e.stride)
	}
	if e.stride > 2 {
		t.Fatalf("stride %d with ticks a millisecond apart, want at most 2", e.stride)
	}

	e.stride, e.ops, e.lastLook = yieldCheck, 0, time.Now().Add(-16*lookPeriod)
	e.tick(yieldCheck)
	if want := uint32(yieldCheck / 16); e.stride > want {
		t.Fatalf("stride %d after a look 16 lookPeriods late, want at most %d", e.stride, want)
	}
}

// tick counts a spinning poll as its polls: one that may poll yieldCheck
// times looks at the clock every time.
func TestTickCountsSpins(t *testing.T) {
	yields := countYields(t)
	var e engine
	for range 10 * yieldCheck {
		e.tick(1)
	}
	*yields = 0
	e.tick(yieldCheck - 1)
	if *yields != 0 {
		t.Fatalf("%d yields within %v", *yields, yieldPeriod)
	}
	time.Sleep(yieldPeriod)
	e.tick(yieldCheck)
	if *yields != 1 {
		t.Fatalf("%d yields after a spin of yieldCheck polls %v after the last yield, want 1", *yields, yieldPeriod)
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

// With any receive queue ParseArgs accepts, the latency loop has a receive
// posted for each of the peer's messages, and refills latRefill at a time
// where the queue holds more than that.
func TestLatRefill(t *testing.T) {
	for depth := 2; depth <= 32; depth++ {
		if _, err := ParseArgs([]string{"-t", "send_lat", "-rx-depth", strconv.Itoa(depth)}); err != nil {
			t.Fatalf("-rx-depth %d: %v", depth, err)
		}
		posted, refills := depth, 0 // fillRecv's first post
		const msgs = 1000
		for i := range msgs {
			if posted < 1 {
				t.Fatalf("-rx-depth %d: message %d finds no receive posted", depth, i)
			}
			posted--
			if latNeedsRefill(posted, depth) {
				posted = depth
				refills++
			}
		}
		if want := msgs / min(latRefill, depth-1); refills != want {
			t.Errorf("-rx-depth %d: %d refills in %d messages, want %d", depth, refills, msgs, want)
		}
	}
}

// tick's look at the clock publishes the loop's completions for the peer
// watch, which reads them from its goroutine; between looks the loop only
// counts them.
func TestTickPublishesProgress(t *testing.T) {
	countYields(t)
	var e engine
	e.done = 5
	e.tick(1) // the first tick looks
	if got := e.progressed(); got != 5 {
		t.Fatalf("progressed() = %d after a look, want 5", got)
	}
	e.done = 9
	e.stride, e.ops = yieldCheck, 0
	e.tick(1)
	if got := e.progressed(); got != 5 {
		t.Fatalf("progressed() = %d between looks, want 5 (published only at a look)", got)
	}
	e.tick(yieldCheck)
	if got := e.progressed(); got != 9 {
		t.Fatalf("progressed() = %d after the next look, want 9", got)
	}
}

// The send_bw server's thread waits (serverWaitMin), played out with
// bwServer's refill, each wait getting exactly the receives it waits for:
// the first waits for one; none waits for more than are left, nor leaves
// fewer than half of those posted when it returns (the queue never runs
// dry before the refill); every wait but the first and the last waits for
// -wait-min when the queue is deep enough.
func TestServerWaitMin(t *testing.T) {
	for _, c := range []struct{ want, iters, rxDepth int }{
		{16, 5000, 512}, {16, 5, 512}, {16, 37, 512}, {1, 100, 512}, {16, 1000, 2}, {16, 1000, 8}, {7, 1000, 33}, {16, 1000, 64},
	} {
		posted, got, waits, full := c.rxDepth, 0, 0, 0
		for got < c.iters {
			m := serverWaitMin(c.want, got, c.iters, posted)
			switch {
			case m < 1 || m > c.iters-got:
				t.Fatalf("%+v: a wait for %d with %d left", c, m, c.iters-got)
			case got == 0 && m != 1:
				t.Fatalf("%+v: the first wait is for %d, want 1", c, m)
			case got > 0 && m > posted/2 && posted > 1:
				t.Fatalf("%+v: a wait for %d with %d posted", c, m, posted)
			}
			if m == c.want {
				full++
			}
			got += m
			posted -= m
			if posted <= c.rxDepth/2 {
				posted = c.rxDepth
			}
			waits++
		}
		if c.rxDepth >= 4*c.want && c.want > 1 && full < waits-2 {
			t.Errorf("%+v: %d of %d waits were for -wait-min", c, full, waits)
		}
	}
}
