package tails

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lines as perf script prints them (-F comm,pid,tid,cpu,time,event,trace --ns).
const script = `
          swapper     0/0     [001]     9.990000000:                     sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=swapper/1 next_pid=0 next_prio=120
    goverbs-perf   167/172   [000]    10.000001000:          irq_vectors:local_timer_entry: vector=236
    goverbs-perf   167/172   [000]    10.000001050:                     sched:sched_wakeup: comm=goverbs-perf pid=169 prio=120 target_cpu=000
    goverbs-perf   167/172   [000]    10.000001080:                     sched:sched_switch: prev_comm=goverbs-perf prev_pid=172 prev_prio=120 prev_state=R ==> next_comm=goverbs-perf next_pid=169 next_prio=120
    goverbs-perf   159/163   [001]    10.000002010:                     sched:sched_wakeup: comm=goverbs-perf pid=159 prio=120 target_cpu=000
    goverbs-perf   159/163   [001]    10.000003010:                     sched:sched_switch: prev_comm=goverbs-perf prev_pid=163 prev_prio=120 prev_state=R ==> next_comm=rcu_preempt next_pid=15 next_prio=120
    goverbs-perf   159/163   [001]    10.000004010:          irq_vectors:local_timer_entry: vector=236
    goverbs-perf   159/163   [001]    10.000004500:                     sched:sched_wakeup: comm=goverbs-perf pid=160 prio=120 target_cpu=001
          swapper     0/0     [001]    10.000009000:                     sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=goverbs-perf next_pid=163 next_prio=120
          swapper     0/0     [000]    10.002000000:                     sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=swapper/0 next_pid=0 next_prio=120
`

func TestParseEvents(t *testing.T) {
	evs, err := ParseEvents(strings.NewReader("some note of perf's\n" + script))
	require.NoError(t, err)
	require.Len(t, evs, 10)
	assert.Equal(t, Event{At: 10_000_001_050, Comm: "goverbs-perf", PID: 167, TID: 172, CPU: 0, Name: "sched_wakeup",
		Trace: "comm=goverbs-perf pid=169 prio=120 target_cpu=000"}, evs[2])
	assert.Equal(t, "swapper", evs[8].Comm)
}

func TestParseTrips(t *testing.T) {
	trips, err := ParseTrips(strings.NewReader("100 20\n130 25\n"))
	require.NoError(t, err)
	assert.Equal(t, []Trip{{100, 20}, {130, 25}}, trips)
	_, err = ParseTrips(strings.NewReader("100 20\n130\n"))
	assert.ErrorContains(t, err, "line 2")
	_, err = ParseTrips(strings.NewReader("100 -1\n"))
	assert.ErrorContains(t, err, "line 1")
}

// Each slow round trip is blamed on the likeliest event within it.
func TestExplain(t *testing.T) {
	evs, err := ParseEvents(strings.NewReader(script))
	require.NoError(t, err)
	at := func(us float64) int64 { return 10_000_000_000 + int64(us*1e3) }
	var trips []Trip
	for i := range 100 { // fast round trips, 1 us each, 10 us apart, before and after
		trips = append(trips, Trip{at(-1000 + 10*float64(i)), time.Microsecond})
	}
	trips = append(trips,
		Trip{at(0.9), 200 * time.Nanosecond},  // fast (below the limit) over the timer's wakeup
		Trip{at(0.95), 10 * time.Microsecond}, // everything: the wakeup onto the other CPU comes first
		Trip{at(2), 500 * time.Nanosecond},    // fast over the wakeup onto the other CPU
		Trip{at(1.9), 1500 * time.Nanosecond}, // the wakeup from CPU 1 onto CPU 0, then rcu_preempt
		Trip{at(2.5), 1500 * time.Nanosecond}, // rcu_preempt ran
		Trip{at(3.9), 3 * time.Microsecond},   // a tick, then a wakeup on its CPU right after it: the timer's
		Trip{at(5), 3 * time.Microsecond},     // nothing
	)
	for i := range 100 {
		trips = append(trips, Trip{at(10 + 10*float64(i)), time.Microsecond})
	}
	rep, err := Explain(trips, evs, "goverbs-perf", 1.2)
	require.NoError(t, err)
	assert.Equal(t, time.Microsecond, rep.Median)
	assert.Equal(t, 5, rep.Outliers)
	assert.Equal(t, map[string]int{WokenOtherCPU: 2, TimerWake: 1, OtherTask: 1, Nothing: 1}, rep.Causes)
	assert.Equal(t, map[string]int{Tick: 2, TimerWake: 2, WokenOtherCPU: 1, OtherTask: 1}, rep.Events)

	// The longest round trip holds every event from the tick on CPU 0 to
	// the swapper's switch on CPU 1, the tool's own switch included; the
	// next two are those of 3 us, the earlier first.
	require.Len(t, rep.Longest, LongestKept)
	longest := rep.Longest[0]
	assert.Equal(t, Trip{at(0.95), 10 * time.Microsecond}, longest.Trip)
	assert.Equal(t, 101, longest.Index)
	assert.Equal(t, 1000950*time.Nanosecond, longest.At)
	require.Len(t, longest.Events, 8)
	assert.Equal(t, "local_timer_entry", longest.Events[0].Name)
	assert.Equal(t, int64(10_000_009_000), longest.Events[7].At)
	assert.Equal(t, []int{105, 106}, []int{rep.Longest[1].Index, rep.Longest[2].Index})
	assert.Empty(t, rep.Longest[2].Events)
	var b strings.Builder
	rep.PrintLongest(&b, 3)
	assert.Equal(t, `longest round trip #1: 10.0 us, round trip 101, 0.001 s into the run, 8 events within it
  +    0.1 us [000] goverbs-perf/172 local_timer_entry: vector=236
  +    0.1 us [000] goverbs-perf/172 sched_wakeup: comm=goverbs-perf pid=169 prio=120 target_cpu=000
  +    0.1 us [000] goverbs-perf/172 sched_switch: prev_comm=goverbs-perf prev_pid=172 prev_prio=120 prev_state=R ==> next_comm=goverbs-perf next_pid=169 next_prio=120
  ... 5 more
longest round trip #2: 3.0 us, round trip 105, 0.001 s into the run, 2 events within it
  +    0.1 us [001] goverbs-perf/163 local_timer_entry: vector=236
  +    0.6 us [001] goverbs-perf/163 sched_wakeup: comm=goverbs-perf pid=160 prio=120 target_cpu=001
longest round trip #3: 3.0 us, round trip 106, 0.001 s into the run, 0 events within it
`, b.String())

	var sum Report
	sum.Add(rep)
	sum.Add(rep)
	assert.Equal(t, 10, sum.Outliers)
	assert.Equal(t, 2, sum.Causes[OtherTask])
	b.Reset()
	sum.Print(&b)
	assert.Contains(t, b.String(), "10 outliers")
	assert.Contains(t, b.String(), "        2            -  "+Nothing)
	assert.Contains(t, b.String(), "        2         1000  "+TimerWake) // 4 in 4 ms
}

// Events that start after the first round trip, or stop before the last
// one ends, cannot explain it: an error, not a table of "nothing".
func TestExplainNeedsCoverage(t *testing.T) {
	evs, err := ParseEvents(strings.NewReader(script))
	require.NoError(t, err)
	_, err = Explain([]Trip{{9_000_000_000, time.Microsecond}, {10_000_002_000, time.Microsecond}}, evs, "goverbs-perf", 3)
	assert.ErrorContains(t, err, "do not cover")
	_, err = Explain(nil, evs, "goverbs-perf", 3)
	assert.Error(t, err)
}

// Lines as perf script prints them with call chains for sched_waking
// (-F comm,pid,tid,cpu,time,event,trace,ip,sym --ns): a chain follows its
// event, and the events without one end with their instruction pointer.
const stackScript = `
    goverbs-perf   167/167   [000]    10.000001000:                     sched:sched_switch: prev_comm=goverbs-perf prev_pid=167 prev_prio=120 prev_state=S ==> next_comm=goverbs-perf next_pid=170 next_prio=120 ffffffff9c2528c8 __schedule
    goverbs-perf   167/167   [000]    10.000002000:                     sched:sched_waking: comm=goverbs-perf pid=170 prio=120 target_cpu=000
	ffffffff9b8e19d2 try_to_wake_up
	ffffffff9b96f081 futex_wake
	ffffffff9c400126 entry_SYSCALL_64_after_hwframe
	           8d963 runtime.futex.abi0
	           1ee65 runtime.notewakeup
	           54828 runtime.startm
	           54bf6 runtime.wakep
	           57925 runtime.goschedImpl
	           6a1d5 runtime.gosched_m
	           8a1d5 runtime.mcall
	           9a1d5 runtime.deeper

    goverbs-perf   167/167   [000]    10.000003000:                     sched:sched_waking: comm=ksoftirqd/0 pid=14 prio=120 target_cpu=000
	ffffffff9b8e19d2 try_to_wake_up
	           9e2c1 __GI___libc_write

    goverbs-perf   167/170   [000]    10.000004000:                     sched:sched_waking: comm=goverbs-perf pid=167 prio=120 target_cpu=000
	ffffffff9b8e19d2 try_to_wake_up
	ffffffff9b95517e hrtimer_wakeup
	ffffffff9c400f06 asm_sysvec_apic_timer_interrupt
	           1098ea clone3

    goverbs-perf   167/167   [000]    10.000005000:                     sched:sched_waking: comm=goverbs-perf pid=170 prio=120 target_cpu=000
	ffffffff9b8e19d2 try_to_wake_up
	           8d963 runtime.futex.abi0
	           1ee65 runtime.notewakeup
	           54828 runtime.startm
	           54bf6 runtime.wakep
	           57925 runtime.goschedImpl
	           6a1d5 runtime.gosched_m
	           8a1d5 runtime.mcall

    goverbs-perf   167/167   [000]    10.000020000:                     sched:sched_waking: comm=goverbs-perf pid=170 prio=120 target_cpu=000
	ffffffff9b8e19d2 try_to_wake_up
	           8d963 runtime.futex.abi0
	           1ee65 runtime.notewakeup
	           54828 runtime.startlockedm
`

// The call chains come with their events, the kernel's frames told from the
// program's, and the instruction pointer perf appends to an event without
// a chain is not part of its fields.
func TestParseEventsStacks(t *testing.T) {
	evs, err := ParseEvents(strings.NewReader(stackScript))
	require.NoError(t, err)
	require.Len(t, evs, 6)
	assert.Equal(t, "prev_comm=goverbs-perf prev_pid=167 prev_prio=120 prev_state=S ==> next_comm=goverbs-perf next_pid=170 next_prio=120", evs[0].Trace)
	assert.Empty(t, evs[0].Stack)
	require.Len(t, evs[1].Stack, 11)
	assert.Equal(t, Frame{Addr: 0xffffffff9b8e19d2, Sym: "try_to_wake_up"}, evs[1].Stack[0])
	assert.True(t, evs[1].Stack[2].Kernel())
	assert.Equal(t, Frame{Addr: 0x8d963, Sym: "runtime.futex.abi0"}, evs[1].Stack[3])
	assert.False(t, evs[1].Stack[3].Kernel())

	assert.Equal(t, "runtime.futex.abi0 < runtime.notewakeup < runtime.startm < runtime.wakep < runtime.goschedImpl < runtime.gosched_m < runtime.mcall",
		Chain(evs[1].Stack), "the innermost ChainDepth user frames")
	assert.Equal(t, "kernel: try_to_wake_up < hrtimer_wakeup < asm_sysvec_apic_timer_interrupt", Chain(evs[3].Stack),
		"in an interrupt, the user frame is only what it stopped")
	assert.Equal(t, "kernel: try_to_wake_up", Chain([]Frame{{Addr: 0xffffffff9b8e19d2, Sym: "try_to_wake_up"}}))
}

// Wakers counts the tool's threads waking its own within the run, by call
// chain: not a kernel thread woken, not a wakeup after the last round trip.
func TestExplainWakers(t *testing.T) {
	evs, err := ParseEvents(strings.NewReader(stackScript))
	require.NoError(t, err)
	trips := []Trip{{10_000_001_000, 4500 * time.Nanosecond}, {10_000_005_500, 500 * time.Nanosecond}, {10_000_006_000, 500 * time.Nanosecond}}
	rep, err := Explain(trips, evs, "goverbs-perf", 3)
	require.NoError(t, err)
	gosched := "runtime.futex.abi0 < runtime.notewakeup < runtime.startm < runtime.wakep < runtime.goschedImpl < runtime.gosched_m < runtime.mcall"
	assert.Equal(t, map[string]int{gosched: 2, "kernel: try_to_wake_up < hrtimer_wakeup < asm_sysvec_apic_timer_interrupt": 1}, rep.Wakers)

	var b strings.Builder
	rep.Print(&b)
	assert.Contains(t, b.String(), "(2 chains)")
	assert.Contains(t, b.String(), "        2       363636  "+gosched+"\n        1       181818  kernel:", "the commonest first, a second over the run's 5.5 us")
	b.Reset()
	rep.PrintLongest(&b, 10)
	assert.Contains(t, b.String(), "sched_waking: comm=goverbs-perf pid=170 prio=120 target_cpu=000\n             from "+gosched+"\n")
}
