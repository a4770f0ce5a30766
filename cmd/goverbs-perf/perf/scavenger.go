package perf

import "runtime/debug"

// releaseFreed returns to the OS now the memory that the collections before
// the loop freed (allocCounter.start makes two), which Go's background
// scavenger would otherwise return during the loop. Every collection wakes
// the scavenger as it starts, and it then releases free pages at about 1%
// of a CPU, waking from a timer, until the heap's retained memory is back
// under its goal: in send_lat on one vCPU under TCG it ran for about 190 us
// of one round trip 4-5 ms into the run, in two runs of three, and made
// their longest round trip (sysmon, runtime.(*scavengerState).wake, then
// bgscavenge; BENCHMARKS.md, "The two-P tail traced"). debug.FreeOSMemory
// collects once more and releases everything free before it returns, so
// the scavenger that this collection wakes finds nothing to do and parks.
// The loop allocates nothing, so nothing wakes it again.
func releaseFreed() { debug.FreeOSMemory() }
