package perf

import (
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

var sink []byte

//go:noinline
func allocateOnce() { sink = make([]byte, 100) }

// The counter sees an allocation made between start and stop, names where
// it was made, and sees none when nothing allocates.
func TestAllocCounter(t *testing.T) {
	a := newAllocCounter()
	a.start()
	r := a.stop()
	if r.Own != 0 {
		t.Fatalf("nothing allocated between start and stop, counted %d: %q", r.Own, r.Sites)
	}
	a.start()
	allocateOnce()
	r = a.stop()
	if r.Own != 1 || len(r.Sites) != 1 || !strings.Contains(r.Sites[0], "perf.allocateOnce allocs_test.go:") {
		t.Fatalf("one allocation: counted %d at %q", r.Own, r.Sites)
	}
}

// The CPU profiler's and the execution tracer's allocations, from opening
// their files (record) to stopping them (-cpuprofile, -trace), are theirs,
// not the loop's; the loop's own still count beside them.
func TestAllocCounterLeavesOutProfiler(t *testing.T) {
	a := newAllocCounter()
	// The paths are made before start: their allocations are the test's.
	dir := t.TempDir()
	profile, tr := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "trace.out")
	a.start()
	stopProfile, err := record(profile, pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		t.Fatal(err)
	}
	stopTrace, err := record(tr, trace.Start, trace.Stop)
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		// Spin, so that the profiler has samples to write.
	}
	allocateOnce()
	stopTrace()
	stopProfile()
	r := a.stop()
	for _, f := range []string{profile, tr} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Fatalf("%s is empty or missing (%v): nothing ran to allocate", f, err)
		}
	}
	if r.Own != 1 || len(r.Sites) != 1 || !strings.Contains(r.Sites[0], "perf.allocateOnce allocs_test.go:") {
		t.Fatalf("one allocation of the loop's under the profiler and the tracer: counted %d at %q", r.Own, r.Sites)
	}
}
