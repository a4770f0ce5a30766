package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/cmd/goverbs-perfcompare/tails"
)

// tailEvents are what perf records for -tails: every context switch and
// wakeup, and the timer interrupts (the scheduler's tick, and the hrtimers
// that end sleeps such as sysmon's). With -tails-stacks, stackEvents too:
// sched_waking fires in the waker's context (sched_wakeup may fire on the
// woken task's CPU), so its call chain is the waker's; frame pointers,
// which Go keeps on amd64 and arm64, unwind the Go runtime's frames.
const (
	tailEvents  = "sched:sched_switch,sched:sched_wakeup,irq_vectors:local_timer_entry"
	stackEvents = "sched:sched_waking/call-graph=fp/"
)

// perfStartLimit is how long perf record may take to start recording (a
// variable for the tests). Under TCG on one vCPU with -icount it has taken
// over 30 s, most of it allocating its 32 MiB buffer.
var perfStartLimit = 5 * time.Minute

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
	events, fields := tailEvents, "comm,pid,tid,cpu,time,event,trace"
	if o.tailsStacks {
		events, fields = events+","+stackEvents, fields+",ip,sym"
	}
	// 32 MiB of buffer a CPU holds a whole run's events, so that perf
	// does not wake to write them out during the loop: on one vCPU its
	// drain took 3 ms of the loop's CPU a quarter-second into every run
	// with 4 MiB.
	rec, err := startRecording(dir, &perfOut, "-q", "-k", "CLOCK_MONOTONIC", "-a", "-m", "8192", "-e", events, "-o", data)
	if err != nil {
		return tails.Report{}, err
	}
	_, runErr := pair("send_lat", o.perf, o.addr, args, sideArgs{client: []string{"-lat-dump", dump}}, port, "")
	// A wrapper script may end on the signal; perf itself still writes
	// its file, and stop waits for it.
	if err := rec.stop(); err != nil && !interrupted(rec.cmd) && runErr == nil {
		return tails.Report{}, fmt.Errorf("perf record: %w\n%s", err, perfOut.String())
	}
	if runErr != nil {
		return tails.Report{}, runErr
	}
	script := exec.Command("perf", "script", "-i", data, "-F", fields, "--ns")
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

// recording is a perf record that startRecording started.
type recording struct {
	cmd    *exec.Cmd
	exited chan error // cmd.Wait's result
}

// stop ends the recording, and returns once perf has written its file
// and exited.
func (r recording) stop() error {
	r.signal(syscall.SIGINT)
	return <-r.exited
}

// signal sends sig to perf's process group: where perf is a wrapper
// script around the real one (Debian's was, before bookworm), the real one
// would otherwise live on, holding the output pipes open.
func (r recording) signal(sig syscall.Signal) {
	syscall.Kill(-r.cmd.Process.Pid, sig)
}

// startRecording starts perf record with args, its events disabled, and
// returns once perf has enabled them: it asks through perf's control FIFO
// (--control, perf 5.10 and later) and waits for the acknowledgement, so
// that the loop that follows is recorded from its start. A fixed wait was
// not enough: under TCG perf's start took from a few seconds to over 30,
// and a run it missed the start of could only fail. perf's output goes to
// out; dir holds the FIFOs.
func startRecording(dir string, out *bytes.Buffer, args ...string) (recording, error) {
	ctl, ack := filepath.Join(dir, "perf-ctl"), filepath.Join(dir, "perf-ack")
	for _, f := range []string{ctl, ack} {
		os.Remove(f) // a previous run's
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			return recording{}, fmt.Errorf("perf's control FIFO: %w", err)
		}
	}
	// Opened read-write, a FIFO's open does not wait for the other end,
	// which perf opens only once it has set up; closed, it ends a read
	// that waits for perf's answer.
	ctlF, err := os.OpenFile(ctl, os.O_RDWR, 0)
	if err != nil {
		return recording{}, err
	}
	defer ctlF.Close()
	ackF, err := os.OpenFile(ack, os.O_RDWR, 0)
	if err != nil {
		return recording{}, err
	}
	defer ackF.Close()
	r := recording{exec.Command("perf", append([]string{"record", "-D", "-1", "--control", "fifo:" + ctl + "," + ack}, args...)...), make(chan error, 1)}
	r.cmd.Stdout, r.cmd.Stderr = out, out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		return recording{}, err
	}
	go func() { r.exited <- r.cmd.Wait() }()
	acked := make(chan error, 1)
	go func() {
		if _, err := ctlF.WriteString("enable\n"); err != nil {
			acked <- err
			return
		}
		buf := make([]byte, 16)
		n, err := ackF.Read(buf)
		if err == nil && !bytes.HasPrefix(buf[:n], []byte("ack")) {
			err = fmt.Errorf("perf answered %q to enable, not ack", buf[:n])
		}
		acked <- err
	}()
	select {
	case err := <-acked:
		if err == nil {
			return r, nil
		}
		r.signal(syscall.SIGKILL)
		<-r.exited
		return recording{}, fmt.Errorf("perf record did not start recording: %w\n%s", err, out.String())
	case err := <-r.exited:
		return recording{}, fmt.Errorf("perf record ended before it recorded (%v)\n%s", err, out.String())
	case <-time.After(perfStartLimit):
		r.signal(syscall.SIGKILL)
		<-r.exited
		return recording{}, fmt.Errorf("perf record did not start recording within %v\n%s", perfStartLimit, out.String())
	}
}
