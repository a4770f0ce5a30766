package perf

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// Go's runtime runs a monitor thread, sysmon, which naps in steps of 20 us
// to 10 ms. When every P is idle, as in a process whose goroutines are
// parked on the netpoller, it sleeps on a note instead, and the next
// syscall or cgo call wakes it (entersyscall, runtime/proc.go): a futex
// wake, a context switch to sysmon, and its nap of 20 us before it looks
// again. A process that waits for a completion event once a message pays
// that once a message: under -icount on one vCPU it was 1 futex call, 0.5
// nanosleep and 1.5 context switches a message, and at send_lat 4 KiB
// +4.4 context switches and 0.80 of perftest's rate.
//
// The runtime has no setting for that sleep, but it never takes it while
// GODEBUG's schedtrace is set, so that it can print a scheduler summary
// every schedtrace milliseconds. sysmonAwake sets the longest period a
// GODEBUG value can hold, 2^31-1 ms (24.8 days): sysmon then stays in its
// naps, which grow to 10 ms when it finds nothing to do. What that costs:
// about 100 sysmon wakeups a second while the process idles; one "SCHED"
// line on stderr at start on a host up longer than 24.8 days (the runtime
// counts the period from boot); and a crash prints the scheduler's state
// before its traceback. GODEBUG is read once, when the process starts,
// hence the restart (Main).
const sysmonAwake = "schedtrace=2147483647"

// sysmonAwakeEnv returns environ with sysmonAwake added to GODEBUG, and
// true, when cfg waits for completion events on the netpoller (-e -wait
// netpoll) and has not asked for the runtime's default (-sysmon-nap),
// unless GODEBUG already sets schedtrace: a value the user chose stands,
// and so does the one a process restarted by Main has. Otherwise it
// returns nil and false. A wait on the thread (-wait thread) needs no
// restart: its P stays busy in the syscall while it waits, so sysmon never
// takes the sleep that the next wake would end (measured: the same rates
// either way).
func sysmonAwakeEnv(cfg Config, environ []string) ([]string, bool) {
	if !cfg.Events || cfg.Wait != NetpollWait || cfg.SysmonNap {
		return nil, false
	}
	env := make([]string, 0, len(environ)+1)
	godebug, found := "", false
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if !found { // the first is the one the runtime and getenv read
				godebug, found = v, true
			}
			continue
		}
		env = append(env, kv)
	}
	if _, set := godebugValue(godebug, "schedtrace"); set {
		return nil, false
	}
	if godebug != "" {
		godebug += ","
	}
	return append(env, "GODEBUG="+godebug+sysmonAwake), true
}

// godebugValue returns the value key has in a GODEBUG list, the last
// setting of it as the runtime reads them, and whether it is set at all.
func godebugValue(godebug, key string) (string, bool) {
	value, set := "", false
	for _, field := range strings.Split(godebug, ",") {
		if v, ok := strings.CutPrefix(field, key+"="); ok {
			value, set = v, true
		}
	}
	return value, set
}

// restartWithEnv replaces the process with itself (os.Args) run in env.
// It returns only on failure, with Main's exit status.
func restartWithEnv(env []string, stderr io.Writer) int {
	exe, err := os.Executable()
	if err == nil {
		err = syscall.Exec(exe, os.Args, env)
	}
	fmt.Fprintf(stderr, "goverbs-perf: -e -wait netpoll: restarting with GODEBUG=...%s to keep the runtime's sysmon awake (-sysmon-nap runs without): %v\n", sysmonAwake, err)
	return 1
}

// reportWait tells how the process waited for completion events (-wait,
// and -wait-min for the send_bw server).
func reportWait(out io.Writer, cfg Config) {
	if cfg.Loop == CgoLoop {
		fmt.Fprintln(out, " wait: thread, blocked on the thread in the cgo loop's C (ibv_get_cq_event), returning at every wake")
		return
	}
	if cfg.Wait == ThreadWait {
		if cfg.Mode == SendBW && cfg.Server == "" {
			fmt.Fprintf(out, " wait: thread, blocked on the thread (hand.Poller.WaitThreadAtLeast), for %d receives at least (-wait-min)\n", cfg.WaitMin)
			return
		}
		fmt.Fprintln(out, " wait: thread, blocked on the thread (hand.Poller.WaitThread)")
		return
	}
	if cfg.Wait == CQThreadWait {
		fmt.Fprintln(out, " wait: cq-thread, blocked on the thread (hand.CQ.WaitThread), then arming and polling from Go")
		return
	}
	fmt.Fprintln(out, " wait: netpoll, parked on the netpoller (hand.CQ.Wait)")
}

// reportSysmon tells whether this process's sysmon may sleep while the
// process waits for events: "awake" when GODEBUG's schedtrace is set to a
// period, "sleeps" otherwise.
func reportSysmon(out io.Writer) {
	if v, _ := godebugValue(os.Getenv("GODEBUG"), "schedtrace"); v != "" && v != "0" {
		fmt.Fprintf(out, " sysmon: awake (GODEBUG schedtrace=%s)\n", v)
		return
	}
	fmt.Fprintln(out, " sysmon: sleeps when the process idles (the Go runtime's default)")
}
