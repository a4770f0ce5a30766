package perf

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/goverbs/goverbs/internal/perf/loopallocs"
)

// allocCounter counts the heap allocations between two points of the
// program and tells the program's own from the runtime's. The runtime
// allocates on its own account while a loop runs, for instance an m and a g
// when it starts a thread to take over a P from a long cgo call; those are
// not the loop's doing (see threadStarts). It samples every allocation (runtime.MemProfileRate
// 1), which costs nothing while nothing allocates.
type allocCounter struct {
	before map[[32]uintptr]int64
}

func newAllocCounter() *allocCounter {
	runtime.MemProfileRate = 1
	return &allocCounter{}
}

// start marks the beginning of the counted stretch.
func (a *allocCounter) start() { a.before = allocRecords() }

// stop returns the allocations since start: by code outside package runtime
// (anywhere on the allocating stack), and by the runtime alone, and where
// the former were made (the first frame outside the runtime). The
// counter's own snapshots and the side channel's handshake are left out.
func (a *allocCounter) stop() loopallocs.Report {
	var r loopallocs.Report
	for stk, n := range allocRecords() {
		n -= a.before[stk]
		if n <= 0 {
			continue
		}
		site, leftOut := firstOutsideRuntime(stk)
		switch {
		case leftOut:
		case site == "":
			r.Runtime += n
		default:
			r.Own += n
			r.Sites = append(r.Sites, fmt.Sprintf("%s x%d", site, n))
		}
	}
	slices.Sort(r.Sites)
	return r
}

// allocRecords returns the cumulative allocation count of every stack in
// the heap profile. Two collections publish the allocations made up to the
// call (the profile lags a cycle behind).
func allocRecords() map[[32]uintptr]int64 {
	runtime.GC()
	runtime.GC()
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	out := make(map[[32]uintptr]int64, len(recs))
	for _, r := range recs {
		out[r.Stack0] += r.AllocObjects
	}
	return out
}

// threadStarts are the runtime functions that allocate a new thread's
// bookkeeping (its m and g0). The runtime starts threads on its own account,
// also from a goroutine's stack (exitsyscall, wakep), so the frames below
// them say nothing about who allocated. A goroutine the program starts is
// the program's.
var threadStarts = []string{"runtime.allocm", "runtime.newm"}

// firstOutsideRuntime returns the first frame of stk outside package
// runtime as "function file:line" ("" when the stack is the runtime's own:
// every frame in the runtime, or a thread start), and whether the stack is
// left out: the counter's own (allocRecords), the handshake's (sync), the
// peer watch's (peerWatch), or the CPU profiler's and the execution
// tracer's (-cpuprofile, -trace, and record, which opens their files).
func firstOutsideRuntime(stk [32]uintptr) (site string, leftOut bool) {
	frames := runtime.CallersFrames(trimStack(stk[:]))
	for {
		f, more := frames.Next()
		switch {
		case strings.HasSuffix(f.Function, "/perf.allocRecords"), strings.HasSuffix(f.Function, "/perf.sync"),
			strings.Contains(f.Function, "/perf.(*peerWatch)."):
			// The counter's own snapshots, the side channel's
			// handshake, which the counted stretch starts with (a
			// blocking read; see Run), and the peer watch's goroutine,
			// which reads the side channel while the loop runs (a
			// timeout's error, every peerTimeout): none is the timed
			// loop.
			return "", true
		case strings.HasPrefix(f.Function, "runtime/pprof."), strings.HasPrefix(f.Function, "runtime/trace."),
			strings.Contains(f.Function, "/perf.record"):
			// Opening the file of the profile or the trace (record),
			// starting and stopping the profiler or the tracer, and
			// their goroutines that write it out while the loop runs:
			// what -cpuprofile and -trace ask for, not the loop, which
			// then still has to allocate nothing.
			return "", true
		case slices.Contains(threadStarts, f.Function):
			return "", false
		case site == "" && f.Function != "" && !strings.HasPrefix(f.Function, "runtime."):
			site = fmt.Sprintf("%s %s:%d", f.Function, filepath.Base(f.File), f.Line)
		}
		if !more {
			return site, false
		}
	}
}

func trimStack(s []uintptr) []uintptr {
	for i, pc := range s {
		if pc == 0 {
			return s[:i]
		}
	}
	return s
}
