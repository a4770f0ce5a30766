package perf

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

// freeUnreleased is the heap memory that is free and not yet returned to
// the OS: what the background scavenger has left to release.
func freeUnreleased() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var garbage [][]byte

// After releaseFreed, the memory that collections freed is back with the
// OS: the scavenger has nothing to release during the loop.
func TestReleaseFreed(t *testing.T) {
	// The runtime releases some freed memory on its own (the background
	// scavenger, and heap growth over the goal): free 16 MiB until a
	// collection leaves at least 4 MiB of it unreleased.
	for try := 0; freeUnreleased() < 4<<20; try++ {
		if try == 10 {
			t.Fatalf("10 times, 16 MiB freed and collected left %d bytes free and unreleased: nothing for releaseFreed to release", freeUnreleased())
		}
		for range 256 {
			garbage = append(garbage, make([]byte, 64<<10))
		}
		garbage = nil
		runtime.GC()
	}
	before := freeUnreleased()
	releaseFreed()
	// Not to zero: the runtime keeps a few pages, and other tests'
	// goroutines may still allocate and collect.
	if free := freeUnreleased(); free > before/4 {
		t.Errorf("after releaseFreed, %d of %d bytes still free and unreleased: the scavenger has them to release", free, before)
	}
}
