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
