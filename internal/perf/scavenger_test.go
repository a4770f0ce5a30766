package perf

import (
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// heapGoal is the runtime's heap goal, from which the scavenger's retained
// goal follows (runtime.gcPaceScavenger).
func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Between quietScavenger and its restore the heap goal, and with it the
// scavenger's, has no bound, so that the scavenger finds nothing to
// release; the restore puts GOGC and the goal back. (That the scavenger
// then stays out of the loop is shown in the VM: make perf-tails with
// -tails-stacks.)
func TestQuietScavenger(t *testing.T) {
	gogc := debug.SetGCPercent(-1) // whatever GOGC the test runs with
	debug.SetGCPercent(gogc)
	bounded := heapGoal()
	restore := quietScavenger()
	quiet := heapGoal()
	restore()
	if quiet < 1<<60 {
		t.Errorf("heap goal while quiet: %d bytes, a bound the scavenger would work to (%d before)", quiet, bounded)
	}
	if got := debug.SetGCPercent(gogc); got != gogc {
		t.Errorf("GOGC after the restore: %d, want %d as before", got, gogc)
	}
	if after := heapGoal(); after >= 1<<60 {
		t.Errorf("heap goal after the restore: %d bytes, still unbounded", after)
	}
}
