package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/cmd/goverbs-perfcompare/tails"
)

// tailEvents are what perf records for -tails: every context switch and
// wakeup, and the timer interrupts (the scheduler's tick, and the hrtimers
// that end sleeps such as sysmon's).
const tailEvents = "sched:sched_switch,sched:sched_wakeup,irq_vectors:local_timer_entry"

// outlierFactor makes a round trip an outlier: longer than this times the
// median.
const outlierFactor = 3

// longestEvents is how many of the events within each of a run's longest
// round trips -tails prints: a round trip of a few hundred microseconds
// holds a few dozen under TCG.
const longestEvents = 60

// runTails runs goverbs-perf's send_lat -tails times per size, each under
// perf record -a in the guest, and prints per size which events the slow
// round trips had within them (package tails).
func runTails(o options) error {
	if _, err := exec.LookPath("perf"); err != nil {
		return fmt.Errorf("-tails needs perf (Debian's linux-perf): %w", err)
	}
	// perf's file and the dump stay off the host's filesystem: writing
	// them through 9p is work for qemu's I/O thread, on the host CPUs the
	// vCPUs run on.
	dir, err := os.MkdirTemp("", "goverbs-tails")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	comm := filepath.Base(o.perf)
	comm = comm[:min(len(comm), 15)] // the kernel's TASK_COMM_LEN
	port := o.port
	for _, size := range o.sizes {
		var sum tails.Report
		args := o.toolArgs("go", "send_lat", size, o.iters("send_lat", size))
		for run := range o.tails {
			rep, err := tailRun(o, dir, comm, args, port)
			port++
			if err != nil {
				return fmt.Errorf("send_lat %d B, run %d: %w", size, run+1, err)
			}
			fmt.Printf("send_lat %6d B run %d: round trip median %.1f us, p99 %.1f us, %d outliers over %d x the median\n",
				size, run+1, us(rep.Median), us(rep.P99), rep.Outliers, outlierFactor)
			rep.PrintLongest(os.Stdout, longestEvents)
			sum.Add(rep)
		}
		fmt.Printf("\nsend_lat %d B, goverbs-perf, %d runs: ", size, o.tails)
		sum.Print(os.Stdout)
		fmt.Println()
	}
	return nil
}

// interrupted says whether cmd ended on SIGINT.
func interrupted(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGINT
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// tailRun is one run: perf record starts, settles, the pair runs with the
// client dumping its round trips, perf stops, and tails explains them.
func tailRun(o options, dir, comm string, args []string, port int) (tails.Report, error) {
	data, dump := filepath.Join(dir, "perf.data"), filepath.Join(dir, "trips.txt")
	var perfOut bytes.Buffer
	// 32 MiB of buffer a CPU holds a whole run's events, so that perf
	// does not wake to write them out during the loop: on one vCPU its
	// drain took 3 ms of the loop's CPU a quarter-second into every run
	// with 4 MiB.
	rec := exec.Command("perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-a", "-m", "8192", "-e", tailEvents, "-o", data)
	rec.Stdout, rec.Stderr = &perfOut, &perfOut
	if err := rec.Start(); err != nil {
		return tails.Report{}, err
	}
	// perf record has no "ready" signal; under TCG it takes seconds to
	// start, and a loop it missed the start of is an error below.
	time.Sleep(o.tailsSettle)
	_, runErr := pair("send_lat", o.perf, o.addr, args, sideArgs{client: []string{"-lat-dump", dump}}, port, "")
	rec.Process.Signal(syscall.SIGINT)
	// Debian's perf is a wrapper script, which the signal ends too; perf
	// itself still writes its file.
	if err := rec.Wait(); err != nil && !interrupted(rec) && runErr == nil {
		return tails.Report{}, fmt.Errorf("perf record: %w\n%s", err, perfOut.String())
	}
	if runErr != nil {
		return tails.Report{}, runErr
	}
	script := exec.Command("perf", "script", "-i", data, "-F", "comm,pid,tid,cpu,time,event,trace", "--ns")
	var scriptErr bytes.Buffer
	script.Stderr = &scriptErr
	out, err := script.Output()
	if err != nil {
		return tails.Report{}, fmt.Errorf("perf script: %w\n%s", err, scriptErr.String())
	}
	evs, err := tails.ParseEvents(bytes.NewReader(out))
	if err != nil {
		return tails.Report{}, err
	}
	f, err := os.Open(dump)
	if err != nil {
		return tails.Report{}, err
	}
	defer f.Close()
	trips, err := tails.ParseTrips(f)
	if err != nil {
		return tails.Report{}, fmt.Errorf("%s: %w", dump, err)
	}
	return tails.Explain(trips, evs, comm, outlierFactor)
}
