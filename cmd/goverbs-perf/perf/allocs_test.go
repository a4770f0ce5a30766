package perf

import (
	"strings"
	"testing"
)

var sink []byte

//go:noinline
func allocateOnce() { sink = make([]byte, 100) }

// The counter sees an allocation made between start and stop, names where
// it was made, and sees none when nothing allocates.
func TestAllocCounter(t *testing.T) {
	a := newAllocCounter()
	a.start()
	own, _, where := a.stop()
	if own != 0 {
		t.Fatalf("nothing allocated between start and stop, counted %d: %q", own, where)
	}
	a.start()
	allocateOnce()
	own, _, where = a.stop()
	if own != 1 || len(where) != 1 || !strings.Contains(where[0], "perf.allocateOnce allocs_test.go:") {
		t.Fatalf("one allocation: counted %d at %q", own, where)
	}
}
