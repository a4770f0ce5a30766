// Package tails explains the slow round trips of a latency run: it lines
// up the round trips goverbs-perf -lat-dump wrote with the scheduler and
// interrupt events perf recorded in the same guest, and names, for each
// round trip that took more than a few times the median, the event that
// most likely made it slow. It is goverbs-perfcompare -tails (make
// perf-tails).
//
// The events are those of
//
//	perf record -k CLOCK_MONOTONIC -a -e sched:sched_switch,sched:sched_wakeup,irq_vectors:local_timer_entry
//	perf script -F comm,pid,tid,cpu,time,event,trace --ns
//
// and the round trips' starts are on the same clock, CLOCK_MONOTONIC. With
// call chains for the wakeups (goverbs-perfcompare -tails-stacks), perf
// records sched:sched_waking/call-graph=fp/ too, which fires in the
// waker's context, and perf script adds ip,sym: each such event's chain
// follows it, one frame a line, and the other events' instruction
// pointers end their lines.
package tails

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Event is one line of perf script.
type Event struct {
	At    int64 // CLOCK_MONOTONIC, ns
	Comm  string
	PID   int
	TID   int
	CPU   int
	Name  string  // sched_switch, sched_wakeup, local_timer_entry, ...
	Trace string  // the tracepoint's fields, as printed
	Stack []Frame // the call chain, innermost first, where perf recorded one
}

// Frame is one return address of an event's call chain.
type Frame struct {
	Addr uint64 // as perf script prints it: the kernel's, or the offset in the user program's mapping
	Sym  string // "[unknown]" where perf found no symbol
}

// Kernel says whether f is in the kernel: the upper half of the address
// space, on amd64 and arm64 alike.
func (f Frame) Kernel() bool { return f.Addr >= 1<<63 }

var (
	eventLine = regexp.MustCompile(`^\s*(.*?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d{9}):\s+(\S+):\s*(.*)$`)
	frameLine = regexp.MustCompile(`^\s+([0-9a-f]+)\s+(.*)$`)
	// inlineIP is what -F ip,sym appends to an event that has no call
	// chain: a tracepoint fires in the kernel, so a kernel address.
	inlineIP = regexp.MustCompile(`\s+[0-9a-f]{16}\s+\S+$`)
)

// ParseEvents reads perf script's output (the fields above). Lines that
// are not events (perf's own notes) are skipped; an event line that does
// not parse is an error naming its line number.
func ParseEvents(r io.Reader) ([]Event, error) {
	var evs []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		m := eventLine.FindStringSubmatch(sc.Text())
		if m == nil {
			if f := frameLine.FindStringSubmatch(sc.Text()); f != nil && len(evs) > 0 {
				addr, err := strconv.ParseUint(f[1], 16, 64)
				if err != nil {
					return nil, fmt.Errorf("perf script line %d: frame address: %w", n, err)
				}
				last := &evs[len(evs)-1]
				last.Stack = append(last.Stack, Frame{Addr: addr, Sym: f[2]})
			}
			continue
		}
		var num [5]int64
		for i, s := range []string{m[2], m[3], m[4], m[5], m[6]} {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("perf script line %d: %w", n, err)
			}
			num[i] = v
		}
		name := m[7]
		if i := strings.LastIndexByte(name, ':'); i >= 0 {
			name = name[i+1:]
		}
		evs = append(evs, Event{At: num[3]*1e9 + num[4], Comm: m[1], PID: int(num[0]), TID: int(num[1]),
			CPU: int(num[2]), Name: name, Trace: inlineIP.ReplaceAllString(m[8], "")})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(evs, func(a, b Event) int { return compare(a.At, b.At) })
	return evs, nil
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Trip is one round trip: its start on CLOCK_MONOTONIC and its length.
type Trip struct {
	Start int64 // ns
	Len   time.Duration
}

// ParseTrips reads goverbs-perf -lat-dump's file: one "start length" line
// (nanoseconds) per round trip.
func ParseTrips(r io.Reader) ([]Trip, error) {
	var trips []Trip
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			return nil, fmt.Errorf("round trip line %d: %q: want start and length", n, sc.Text())
		}
		start, err1 := strconv.ParseInt(f[0], 10, 64)
		l, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || l < 0 {
			return nil, fmt.Errorf("round trip line %d: %q: want two integers, the length not negative", n, sc.Text())
		}
		trips = append(trips, Trip{Start: start, Len: time.Duration(l)})
	}
	return trips, sc.Err()
}

// The kinds of event, from the one most likely to have made a round trip
// slow to the least; Kinds lists them in this order.
const (
	WokenOtherCPU = "a Go thread woke another onto the other CPU" // wakep: a yield, a P handed off
	WokenSameCPU  = "a Go thread woke another on its own CPU"
	TimerWake     = "a timer woke a Go thread (sysmon's naps)"
	OtherTask     = "another task ran (kernel thread, other process)"
	Tick          = "a timer interrupt, no switch"
	Nothing       = "nothing in the guest (the host)"
)

// Kinds is every kind, most likely cause first.
var Kinds = []string{WokenOtherCPU, WokenSameCPU, TimerWake, OtherTask, Tick, Nothing}

// timerWakeWindow is how soon after a timer interrupt on a CPU a wakeup
// there counts as the timer's.
const timerWakeWindow = 100 * time.Microsecond

// kind says what ev is, for a tool whose processes are named comm; "" for
// an event that cannot slow a round trip (the tool's own switches).
func kind(ev Event, prev *Event, comm string) string {
	switch ev.Name {
	case "sched_wakeup":
		if field(ev.Trace, "comm") != comm {
			return ""
		}
		if prev != nil && prev.Name == "local_timer_entry" && ev.At-prev.At < int64(timerWakeWindow) {
			return TimerWake
		}
		if field(ev.Trace, "target_cpu") != fmt.Sprintf("%03d", ev.CPU) {
			return WokenOtherCPU
		}
		return WokenSameCPU
	case "sched_switch":
		if next := field(ev.Trace, "next_comm"); next != comm && next != "swapper" && !strings.HasPrefix(next, "swapper/") {
			return OtherTask
		}
	case "local_timer_entry":
		return Tick
	}
	return ""
}

// field is the value of name=value in a tracepoint's fields.
func field(trace, name string) string {
	for _, f := range strings.Fields(trace) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}

// Report is what Explain found in one run or, summed, in several.
type Report struct {
	Trips    int
	Seconds  float64        // from the first round trip's start to the last one's end
	Median   time.Duration  // of the round trips (of the last run, when summed)
	P99      time.Duration  // likewise
	Outliers int            // round trips longer than the factor times the median
	Causes   map[string]int // outliers by the most likely kind of event within them
	Events   map[string]int // every event of each kind from the first start to the last end

	// The run's longest round trips (the last run's, when summed), longest
	// first, each with every event perf recorded within it, the tool's own
	// included: what a maximum is made of, beyond the kind that Causes
	// gives it. perftest's maximum is the second longest.
	Longest []Slow

	// Wakers counts, from the first start to the last end, the tool's
	// threads waking the tool's threads (the client's or the server's: perf
	// tells processes apart by comm), by the waker's call chain (Chain),
	// where perf recorded sched_waking with call chains: which path of the
	// Go runtime, or which system call, wakes them.
	Wakers map[string]int
}

// ChainDepth is how many frames of a wakeup's call chain Chain keeps: from
// the futex call up to the scheduler's caller (runtime.futex, notewakeup,
// startm, wakep or handoffp, then who asked).
const ChainDepth = 7

// Chain names a call chain by its innermost ChainDepth user-space frames,
// innermost first; by its kernel frames when the chain has no user part
// (a kernel thread) or the event came in an interrupt, where the user part
// is only what the interrupt stopped.
func Chain(stack []Frame) string {
	var user, kernel []string
	interrupted := false
	for _, f := range stack {
		if !f.Kernel() {
			user = append(user, f.Sym)
			continue
		}
		kernel = append(kernel, f.Sym)
		interrupted = interrupted || strings.Contains(f.Sym, "interrupt")
	}
	if len(user) == 0 || interrupted {
		return "kernel: " + strings.Join(kernel[:min(ChainDepth, len(kernel))], " < ")
	}
	return strings.Join(user[:min(ChainDepth, len(user))], " < ")
}

// Slow is one of a run's longest round trips.
type Slow struct {
	Trip
	Index  int           // its place in the run, from 0
	At     time.Duration // from the run's first round trip's start
	Events []Event       // every event within it
}

// LongestKept is how many of a run's longest round trips Explain keeps.
const LongestKept = 3

// Explain finds the round trips longer than factor times the median and
// names for each the most likely cause among the events within it (Kinds'
// order), and counts the events of each kind over the whole run. comm is
// the tool's process name (perf's comm, at most 15 bytes).
func Explain(trips []Trip, evs []Event, comm string, factor float64) (Report, error) {
	if len(trips) == 0 {
		return Report{}, fmt.Errorf("no round trips")
	}
	lens := make([]time.Duration, len(trips))
	for i, t := range trips {
		lens[i] = t.Len
	}
	slices.Sort(lens)
	rep := Report{Trips: len(trips), Median: lens[len(lens)/2], P99: lens[(len(lens)*99+99)/100-1],
		Causes: map[string]int{}, Events: map[string]int{}, Wakers: map[string]int{}}
	first, last := trips[0].Start, trips[len(trips)-1].Start+int64(trips[len(trips)-1].Len)
	rep.Seconds = float64(last-first) / 1e9
	if len(evs) == 0 || evs[0].At > first || evs[len(evs)-1].At < last {
		return rep, fmt.Errorf("perf's events (%s) do not cover the round trips (%s): was perf recording, on CLOCK_MONOTONIC?",
			span(evs), fmt.Sprintf("%.6f to %.6f s", float64(first)/1e9, float64(last)/1e9))
	}
	// Each event's kind, in time order; the previous event on each CPU
	// tells a timer's wakeup from a thread's.
	type stamped struct {
		at   int64
		kind string
	}
	var kinds []stamped
	prev := map[int]*Event{}
	for i := range evs {
		ev := &evs[i]
		inRun := ev.At >= first && ev.At <= last
		if k := kind(*ev, prev[ev.CPU], comm); k != "" {
			kinds = append(kinds, stamped{ev.At, k})
			if inRun {
				rep.Events[k]++
			}
		}
		if inRun && ev.Name == "sched_waking" && len(ev.Stack) > 0 && ev.Comm == comm && field(ev.Trace, "comm") == comm {
			rep.Wakers[Chain(ev.Stack)]++
		}
		prev[ev.CPU] = ev
	}
	order := make([]int, len(trips))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compare(int64(trips[b].Len), int64(trips[a].Len)) })
	for _, i := range order[:min(LongestKept, len(order))] {
		t := trips[i]
		rep.Longest = append(rep.Longest, Slow{Trip: t, Index: i, At: time.Duration(t.Start - first),
			Events: within(evs, t, func(e Event) int64 { return e.At })})
	}
	limit := time.Duration(factor * float64(rep.Median))
	for _, t := range trips {
		if t.Len <= limit {
			continue
		}
		rep.Outliers++
		cause := Nothing
		for _, s := range within(kinds, t, func(s stamped) int64 { return s.at }) {
			if slices.Index(Kinds, s.kind) < slices.Index(Kinds, cause) {
				cause = s.kind
			}
		}
		rep.Causes[cause]++
	}
	return rep, nil
}

// within returns the part of s, sorted by at, that falls within the
// round trip t, its end included.
func within[E any](s []E, t Trip, at func(E) int64) []E {
	cmp := func(e E, x int64) int { return compare(at(e), x) }
	lo, _ := slices.BinarySearchFunc(s, t.Start, cmp)
	hi, _ := slices.BinarySearchFunc(s, t.Start+int64(t.Len)+1, cmp)
	return s[lo:hi]
}

func span(evs []Event) string {
	if len(evs) == 0 {
		return "none"
	}
	return fmt.Sprintf("%.6f to %.6f s", float64(evs[0].At)/1e9, float64(evs[len(evs)-1].At)/1e9)
}

// Add sums o into r: counts and seconds add, the median and p99 become
// o's.
func (r *Report) Add(o Report) {
	if r.Causes == nil {
		r.Causes, r.Events, r.Wakers = map[string]int{}, map[string]int{}, map[string]int{}
	}
	r.Trips += o.Trips
	r.Seconds += o.Seconds
	r.Outliers += o.Outliers
	r.Median, r.P99 = o.Median, o.P99
	r.Longest = o.Longest
	for k, v := range o.Causes {
		r.Causes[k] += v
	}
	for k, v := range o.Events {
		r.Events[k] += v
	}
	for k, v := range o.Wakers {
		r.Wakers[k] += v
	}
}

// wakersShown is how many call chains Print lists, the commonest first.
const wakersShown = 10

// Print writes r's table: per kind, the outliers it explains and its
// events a second over the runs.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "%d round trips in %.3f s, %d outliers (%.1f%%)\n", r.Trips, r.Seconds, r.Outliers,
		100*float64(r.Outliers)/float64(max(r.Trips, 1)))
	fmt.Fprintf(w, "%9s %12s  %s\n", "outliers", "events/s", "most likely cause within the round trip")
	for _, k := range Kinds {
		rate := "-"
		if k != Nothing {
			rate = fmt.Sprintf("%.0f", float64(r.Events[k])/max(r.Seconds, 1e-9))
		}
		fmt.Fprintf(w, "%9d %12s  %s\n", r.Causes[k], rate, k)
	}
	if len(r.Wakers) == 0 {
		return
	}
	chains := slices.Collect(maps.Keys(r.Wakers))
	slices.SortFunc(chains, func(a, b string) int {
		if c := compare(int64(r.Wakers[b]), int64(r.Wakers[a])); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	fmt.Fprintf(w, "the tool's threads (either side's) waking the tool's, by the waker's call chain (%d chains):\n", len(chains))
	fmt.Fprintf(w, "%9s %12s  %s\n", "wakeups", "a second", "call chain, innermost first")
	for _, c := range chains[:min(wakersShown, len(chains))] {
		fmt.Fprintf(w, "%9d %12.0f  %s\n", r.Wakers[c], float64(r.Wakers[c])/max(r.Seconds, 1e-9), c)
	}
}

// PrintLongest writes the run's longest round trips, where each was in
// the run, and the first limit events within each, at their times into
// the round trip.
func (r Report) PrintLongest(w io.Writer, limit int) {
	for n, slow := range r.Longest {
		fmt.Fprintf(w, "longest round trip #%d: %.1f us, round trip %d, %.3f s into the run, %d events within it\n",
			n+1, float64(slow.Len)/1e3, slow.Index, slow.At.Seconds(), len(slow.Events))
		for i, ev := range slow.Events {
			if i == limit {
				fmt.Fprintf(w, "  ... %d more\n", len(slow.Events)-limit)
				break
			}
			fmt.Fprintf(w, "  +%7.1f us [%03d] %s/%d %s: %s\n", float64(ev.At-slow.Start)/1e3, ev.CPU, ev.Comm, ev.TID, ev.Name, ev.Trace)
			if len(ev.Stack) > 0 {
				fmt.Fprintf(w, "             from %s\n", Chain(ev.Stack))
			}
		}
	}
}
