package perf

import "runtime/debug"

// quietScavenger leaves Go's background scavenger nothing to do until the
// returned function runs, by switching the collector off (GOGC=off) before
// the collections that start the allocation count (allocCounter.start
// makes two, with runtime.GC, which runs regardless), and returns the
// function that switches it back on.
//
// Every collection wakes the scavenger as it starts, and it then returns
// free pages to the OS at about 1% of a CPU, waking from a timer, until the
// heap's retained memory is down to its goal: in send_lat on one vCPU
// under TCG it ran for about 190 us of one round trip in the run's first
// 5 ms, in half the runs, and made their longest round trip (sysmon,
// runtime.(*scavengerState).wake, then bgscavenge; BENCHMARKS.md,
// "Known gaps"). With the collector off, the
// goal that each collection sets as it ends has no bound
// (runtime.gcPaceScavenger), so the scavenger, once woken, finds nothing
// to do and parks.
//
// Switching the collector off changes nothing else in the loop, which
// allocates nothing (loopallocs). Returning the memory before the loop
// instead (debug.FreeOSMemory, all of it) left the bandwidth rows' Go runs
// slower and further apart in a complete perf-compare run (0.1-2% by
// median, up to 5% by the slowest run; not traced: the guest's transparent
// huge pages are always on, and khugepaged may fill the released holes
// again).
func quietScavenger() (restore func()) {
	old := debug.SetGCPercent(-1)
	return func() { debug.SetGCPercent(old) }
}
