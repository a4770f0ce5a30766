package rxe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/cmtime"
	"github.com/goverbs/goverbs/internal/listenwait"
	"github.com/goverbs/goverbs/internal/perf"
	"github.com/goverbs/goverbs/internal/perf/loopallocs"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// perfChildEnv makes this test binary run goverbs-perf (perf.Main with the
// binary's arguments) instead of the tests: TestInteropPerfModes starts
// each side of a run so, in a process of its own, because the allocation
// count goverbs-perf reports for its timed loop is the process's.
const perfChildEnv = "GOVERBS_TEST_RUN_PERF"

func TestMain(m *testing.M) {
	if os.Getenv(perfChildEnv) == "1" {
		os.Exit(perf.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(cmtimeChildEnv) == "1" {
		os.Exit(cmtime.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(staleKeyChildEnv) == "1" {
		os.Exit(skChild(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// goverbs-perf in each of perftest's four modes, server and client each a
// process of its own on rxe0, with perftest's defaults (one WR a post, one
// in 100 signaled) and with post lists, and the bandwidth modes with their
// loops in C (-loop c, lists) and in Go over the C loop's post and poll
// (-loop cgo, with perftest's defaults, with lists, and waiting for
// events in C), and with perftest's defaults waiting for
// completion events (-e) both ways: blocked in the channel's read on the thread
// (hand.Poller.WaitThread, the default), and parked on the netpoller
// (-wait netpoll, hand.CQ.Wait) in a process restarted with the runtime's
// sysmon kept awake, blocked on the thread with the loop's arm and poll
// in Go (-wait cq-thread, hand.CQ.WaitThread), and blocked on the thread with the loop's goroutine
// locked to it (-lock-thread); each side must report how it waited, with
// the netpoller only sysmon awake, and its thread locked only when asked
// to. The client's result row must carry
// the size and the iterations asked for and a positive rate (make
// perf-compare sets the rates against perftest's), and neither side's timed
// loop may allocate.
func TestInteropPerfModes(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(perfChildEnv, "1")
	port := 18621
	for _, mode := range []string{"send_bw", "write_bw", "read_bw", "send_lat"} {
		for _, post := range []struct {
			name, list, mod, loop string
			wait                  string // -e -wait; "" for busy-polling
			lock                  bool   // -lock-thread
		}{
			{"defaults", "1", "100", "go", "", false}, {"lists", "4", "8", "go", "", false}, {"c_loop_lists", "4", "8", "c", "", false},
			{"cgo_loop", "1", "100", "cgo", "", false}, {"cgo_loop_lists", "4", "8", "cgo", "", false}, {"cgo_loop_events", "1", "100", "cgo", "thread", false},
			{"events", "1", "100", "go", "thread", false}, {"events_netpoll", "1", "100", "go", "netpoll", false}, {"events_cq_thread", "1", "100", "go", "cq-thread", false},
			{"events_locked", "1", "100", "go", "thread", true},
		} {
			if post.loop != "go" && mode == "send_lat" {
				continue // -loop c and cgo are the bandwidth loops'
			}
			t.Run(mode+"/"+post.name, func(t *testing.T) {
				port++
				ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
				defer cancel()
				args := []string{"-t", mode, "-d", device, "-x", strconv.Itoa(gidIndex), "-s", "4096", "-n", "300",
					"-p", strconv.Itoa(port), "-l", post.list, "-Q", post.mod, "-loop", post.loop}
				if post.wait != "" {
					args = append(args, "-e", "-wait", post.wait)
				}
				if post.lock {
					args = append(args, "-lock-thread")
				}
				srv := tooltest.StartC(t, ctx, "Go server", self, args...)
				if err := listenwait.TCP(ctx, port); err != nil {
					t.Fatalf("goverbs-perf server: %v\n%s", err, srv.Wait().Out)
				}
				cliArgs := append(slices.Clone(args), localAddr())
				dump := filepath.Join(t.TempDir(), "trips")
				if mode == "send_lat" {
					cliArgs = append(cliArgs, "-lat-dump", dump)
				}
				before := monotonicNow()
				cli := tooltest.StartC(t, ctx, "Go client", self, cliArgs...).Wait()
				after := monotonicNow()
				s := srv.Wait()
				t.Logf("client:\n%s\nserver:\n%s", cli.Out, s.Out)
				if cli.Failed() || s.Failed() {
					t.Fatalf("client exit %d %s, server exit %d %s", cli.ExitCode, cli.Err, s.ExitCode, s.Err)
				}
				row := resultRow(cli.Out)
				if len(row) < 5 || row[0] != "4096" || row[1] != "300" {
					t.Fatalf("client result row %q: want 4096 bytes, 300 iterations", row)
				}
				col := 4 // MsgRate[Mpps]
				if mode == "send_lat" {
					col = 2 // t_min[usec]
				}
				if v, err := strconv.ParseFloat(row[col], 64); err != nil || v <= 0 {
					t.Errorf("client result row %q: column %d is not a positive number", row, col+1)
				}
				if mode == "send_lat" {
					checkLatDump(t, dump, 300, before, after)
				}
				for _, side := range []tooltest.Run{cli, s} {
					// -e -wait netpoll restarts the process with sysmon kept
					// awake (perf/sysmon.go); -wait thread needs no restart.
					if awake, want := strings.Contains(side.Out, "\n sysmon: awake (GODEBUG schedtrace=2147483647)\n"), post.wait == "netpoll"; awake != want {
						t.Errorf("%s: reports sysmon awake: %v, want %v (-wait %q)", side.Name, awake, want, post.wait)
					}
					if post.wait != "" && !strings.Contains(side.Out, "\n wait: "+post.wait+",") {
						t.Errorf("%s: does not report \" wait: %s,\"", side.Name, post.wait)
					}
					if locked := strings.Contains(side.Out, "\n thread: the loop's goroutine locked to its OS thread (-lock-thread)\n"); locked != post.lock {
						t.Errorf("%s: reports its loop locked to its thread: %v, want %v", side.Name, locked, post.lock)
					}
					// The side that answers posts its last message as its loop
					// ends; the loop polls that send's completion before it
					// ends, so the message is out before the side's own work
					// after the loop (engine.reapSends).
					if want := "\n sends: 300 posted, 300 completed before the report\n"; mode == "send_lat" && !strings.Contains(side.Out, want) {
						t.Errorf("%s: does not report %q", side.Name, strings.TrimSpace(want))
					}
					r, ok, err := loopallocs.Parse(side.Out)
					if !ok || err != nil || r.Own != 0 {
						t.Errorf("%s: heap allocations in the timed loop: %+v (reported: %v, %v), want 0 of the loop's own", side.Name, r, ok, err)
					}
				}
			})
		}
	}
}

// checkLatDump checks goverbs-perf -lat-dump's file: n round trips, one
// after another, within [before, after] on CLOCK_MONOTONIC.
func checkLatDump(t *testing.T, path string, n int, before, after int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("-lat-dump: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("-lat-dump: %d lines, want %d", len(lines), n)
	}
	end := before
	for i, l := range lines {
		var start, length int64
		if _, err := fmt.Sscanf(l, "%d %d", &start, &length); err != nil || length <= 0 {
			t.Fatalf("-lat-dump line %d: %q: want start and a positive length (%v)", i+1, l, err)
		}
		if start < end {
			t.Fatalf("-lat-dump line %d: starts at %d, before %d (the previous round trip's end or the client's start)", i+1, start, end)
		}
		end = start + length
	}
	if end > after {
		t.Fatalf("-lat-dump: the last round trip ends at %d, after the client exited (%d)", end, after)
	}
}

// monotonicNow reads CLOCK_MONOTONIC, the clock of -lat-dump.
func monotonicNow() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// resultRow returns the fields of the row after perftest's "#bytes" header.
func resultRow(out string) []string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "#bytes") && i+1 < len(lines) {
			return strings.Fields(lines[i+1])
		}
	}
	return nil
}
