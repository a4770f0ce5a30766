package perf

import (
	"strconv"
	"strings"
	"testing"
)

// runPlan plays bwClient's loop against a send queue that completes what
// it holds in order, the client reaping up to 16 completions a poll, as
// its Poller. It returns the WRs the client learnt were done when it had
// nothing left to wait for, and fails the test if the send queue ever held
// more than TxDepth.
func runPlan(t *testing.T, p sendPlan) (done int) {
	t.Helper()
	var posted int
	var signaled []int // outstanding signaled WRs, oldest first
	for done < p.Iters {
		for n := p.next(posted, done); n > 0; n = p.next(posted, done) {
			for seq := posted; seq < posted+n; seq++ {
				if p.signaled(seq) {
					signaled = append(signaled, seq)
				}
			}
			posted += n
			if posted-done > p.TxDepth {
				t.Fatalf("%+v: %d WRs in a send queue of %d", p, posted-done, p.TxDepth)
			}
		}
		if len(signaled) == 0 {
			return done // the real loop would poll for ever
		}
		k := min(16, len(signaled))
		done = signaled[k-1] + 1
		signaled = signaled[k:]
	}
	return done
}

// Every combination of -n, -l, -Q (given or not) and -tx-depth that
// ParseArgs accepts for a bandwidth mode is one the client finishes, and
// those it could not finish are refused with an error naming the flags.
func TestSendPlanFinishes(t *testing.T) {
	accepted, refused := 0, 0
	for iters := 5; iters <= 40; iters++ {
		for l := 1; l <= 12; l++ {
			for q := 0; q <= 12; q++ { // 0: no -Q
				for depth := 1; depth <= 16; depth++ {
					args := []string{"-t", "write_bw", "-n", strconv.Itoa(iters), "-l", strconv.Itoa(l), "-tx-depth", strconv.Itoa(depth)}
					if q > 0 {
						args = append(args, "-Q", strconv.Itoa(q))
					}
					cfg, err := ParseArgs(args)
					if err != nil {
						refused++
						if !strings.Contains(err.Error(), "-l") && !strings.Contains(err.Error(), "-Q") {
							t.Fatalf("ParseArgs(%q): %v, which names neither -l nor -Q", args, err)
						}
						continue
					}
					accepted++
					if done := runPlan(t, cfg.sendPlan()); done != iters {
						t.Fatalf("ParseArgs(%q) accepted %+v, where the client stops at %d of %d", args, cfg.sendPlan(), done, iters)
					}
				}
			}
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("%d combinations accepted, %d refused", accepted, refused)
	}
	// The reviewer's, which hung.
	for _, args := range [][]string{{"-l", "48"}, {"-l", "3", "-Q", "128"}, {"-tx-depth", "100", "-l", "8", "-Q", "100"}, {"-l", "8", "-Q", "3"}} {
		if _, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q): want an error", args)
		}
	}
	// runPlan does see a hang: -l 3 -Q 128 leaves 126 unsignaled WRs,
	// and no room for three more.
	if done := runPlan(t, sendPlan{Iters: 300, PostList: 3, CQMod: 128, TxDepth: 128}); done == 300 {
		t.Error("runPlan finished a plan that hangs")
	}
}

// The C loop posts and signals as the Go loop does.
func TestCLoopPlanMatches(t *testing.T) {
	for _, p := range []sendPlan{{12, 3, 3, 8}, {10, 1, 4, 4}, {300, 3, 128, 128}, {7, 2, 5, 6}} {
		for posted := 0; posted <= p.Iters; posted++ {
			for done := 0; done <= posted; done++ {
				n, sig := cloopPlan(p, posted, done)
				if want := p.next(posted, done); n != want {
					t.Errorf("%+v posted %d done %d: C posts %d, Go %d", p, posted, done, n, want)
				}
				if want := p.signaled(posted); sig != want {
					t.Errorf("%+v: C signals WR %d: %v, Go %v", p, posted, sig, want)
				}
			}
		}
	}
}

// -n goes to 2^32, past C's int: the C loop counts in int64_t. Checked at
// the edges of int32 and of the run, where an int count would wrap.
func TestCLoopPlanPastInt32(t *testing.T) {
	p := sendPlan{Iters: maxIters, PostList: 4, CQMod: 64, TxDepth: 128}
	for _, posted := range []int{1<<31 - 4, 1<<31 - 1, 1 << 31, 1<<31 + 63, maxIters - 64, maxIters - 2, maxIters - 1, maxIters} {
		for _, behind := range []int{0, 1, 64, 128} {
			done := max(posted-behind, 0)
			n, sig := cloopPlan(p, posted, done)
			if want := p.next(posted, done); n != want {
				t.Errorf("posted %d done %d: C posts %d, Go %d", posted, done, n, want)
			}
			if want := p.signaled(posted); sig != want {
				t.Errorf("C signals WR %d: %v, Go %v", posted, sig, want)
			}
		}
	}
}
