package perf

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/hand"
)

// pollerSize is how many completions a poll returns at most.
const pollerSize = 16

// engine is the data path. Everything is allocated by newEngine; the
// loops do not allocate until they fail.
type engine struct {
	cfg       Config
	qp        *hand.QP
	cq        *hand.CQ
	sge       hand.SGE
	send      *hand.SendChain
	recv      *hand.RecvChain
	poller    *hand.Poller
	raddr     uint64
	rkey      uint32
	posted    int // receives outstanding
	sent      int // send_lat: signaled sends posted
	sendsOut  int // send_lat: of those, the ones not yet polled
	lat       []time.Duration
	starts    []int64   // with Config.LatDump: each round trip's start, CLOCK_MONOTONIC ns
	peak      float64   // bytes a second between two signaled completions, at best
	ops       uint32    // posts and polls since tick's last look at the clock
	stride    uint32    // posts and polls between tick's looks
	lastLook  time.Time // tick's last look
	lastYield time.Time // tick's last yield
	drained   bool      // with Config.Events: the last poll found nothing
	waitMin   int       // with Config.Events and ThreadWait: the completions the next wait returns with, at least
	// done counts the completions the loops have polled; progress is it
	// as tick's last look at the clock (or the last event wait) saw it, for
	// the peer watch (peerWatch) to read from its goroutine, and cprogress
	// the C loop's count, in C memory, with -loop c.
	done      int
	progress  atomic.Int64
	cprogress *int64
}

func newEngine(cfg Config, qp *hand.QP, cq *hand.CQ, mr *hand.MR) (*engine, error) {
	e := &engine{cfg: cfg, qp: qp, cq: cq, sge: mr.SGE(0, cfg.Size), drained: true, waitMin: 1}
	var err error
	if e.send, err = hand.NewSendChain(cfg.PostList, 1, 0); err != nil {
		return nil, err
	}
	if e.recv, err = hand.NewRecvChain(cfg.RxDepth, 1); err != nil {
		e.free()
		return nil, err
	}
	if e.poller, err = hand.NewPoller(cq, pollerSize); err != nil {
		e.free()
		return nil, err
	}
	if cfg.Loop == CLoop {
		e.cprogress = newCProgress()
	}
	if cfg.Mode == SendLat {
		e.lat = make([]time.Duration, cfg.Iters)
		if cfg.LatDump != "" {
			e.starts = make([]int64, cfg.Iters)
		}
	}
	return e, nil
}

func (e *engine) free() {
	if e.send != nil {
		e.send.Close()
	}
	if e.recv != nil {
		e.recv.Close()
	}
	if e.poller != nil {
		e.poller.Close()
	}
	if e.cprogress != nil {
		freeCProgress(e.cprogress)
		e.cprogress = nil
	}
}

// fillRecv tops the receive queue up to RxDepth with one post.
func (e *engine) fillRecv() error {
	k := e.cfg.RxDepth - e.posted
	if k <= 0 {
		return nil
	}
	v := e.recv.Reserve(k)
	for i := range k {
		v.Set(i, 0, e.sge)
	}
	e.tick(1)
	if err := e.recv.PostRecv(e.qp); err != nil {
		e.recv.Reset()
		return fmt.Errorf("post receive: %w", err)
	}
	e.posted += k
	return nil
}

// yieldCheck is the most posts and polls tick lets pass between two looks
// at the clock, lookPeriod how far apart it keeps the looks, and
// yieldPeriod how long it lets the loop run between two yields. A look
// costs some 20 ns on real hardware (the vDSO), so where posts are fast
// (64 B: tens of nanoseconds on hardware) it looks once every 64; where
// they are slow it looks more often, down to every post: at 64 KiB under
// TCG one post takes about a millisecond, and 64 of them let sysmon's 10 ms
// pass unseen.
const (
	yieldCheck  = 64
	lookPeriod  = yieldPeriod / 8
	yieldPeriod = 5 * time.Millisecond
)

// tick counts n posts or polls, and yields the processor (runtime.Gosched)
// once yieldPeriod has passed since the last yield, which a busy loop must
// do to keep the runtime quiet: a goroutine that runs for 10 ms without
// being rescheduled gets preempted by sysmon, which, finding it in a cgo
// call, takes its P and hands it to another thread, then wakes every 20 us
// for the next millisecond and more (its back-off starts over whenever it
// takes a P): thousands of wakeups a second of sysmon's thread, each taking
// a CPU from the loop or its peer for a context switch there and back. A
// yield starts the 10 ms over. Not more often: each Gosched that leaves a P
// idle wakes a thread to look for work (wakep), a context switch too
// (BENCHMARKS.md, "Known gaps", for what a yield costs a locked goroutine).
//
// It looks at the clock once stride posts and polls have passed since the
// last look, and adapts stride to the loop's pace: when a look comes more
// than lookPeriod after the last it scales stride down in proportion, and
// when it comes less than a quarter of that after, it doubles stride, up to
// yieldCheck. The first tick looks (and yields).
func (e *engine) tick(n uint32) {
	if e.ops += n; e.ops < e.stride {
		return
	}
	e.ops = 0
	now := time.Now()
	switch since := now.Sub(e.lastLook); {
	case since > lookPeriod:
		e.stride = uint32(max(1, int64(e.stride)*int64(lookPeriod)/int64(since)))
	case since < lookPeriod/4 && e.stride < yieldCheck:
		e.stride = min(yieldCheck, 2*e.stride)
	}
	e.lastLook = now
	e.progress.Store(int64(e.done))
	if now.Sub(e.lastYield) >= yieldPeriod {
		yield()
		e.lastYield = now
	}
}

// yield is runtime.Gosched; tests count the calls.
var yield = runtime.Gosched

// poll ticks and polls the CQ, up to Spin times in one cgo call
// (hand.Poller.PollSpin): the loops poll only when they have nothing else
// to do until a completion comes, so spinning in C changes nothing but the
// crossings, one per Spin empty polls.
// tick counts the call as the Spin polls it may make.
//
// With Config.Events it polls as perftest's -e does, which is what makes
// the rows like for like: after a poll that found nothing it first waits
// for the CQ's next completion event and arms the CQ again; after one that
// found completions it polls at once, since those that came before the arm
// raise no event (waiting before every poll, as a first version did, left
// those past the poller's 16 unreaped at the end of a run, where no later
// completion raised an event: the run hung). With Config.Wait thread that
// whole loop is hand.Poller.WaitThread, one cgo call a wake, blocked in
// the channel's read; with netpoll it is spelled out here, parked on the
// netpoller (hand.CQ.Wait), and so with cq-thread, blocked in the read
// (hand.CQ.WaitThread), since hand.Poller.Wait, which polls, arms and
// polls again before it parks, kept the CPU from the server on one vCPU: its
// receive queue ran dry (6 RNR NAKs a run, where perftest had none),
// though the rate came out the same. A goroutine that waited is
// rescheduled when it wakes, so the loop does not tick.
func (e *engine) poll() ([]hand.WC, error) {
	if e.cfg.Events {
		wcs, err := e.waitEvent()
		// A wake costs syscalls: the atomic store is nothing beside them.
		e.done += len(wcs)
		e.progress.Store(int64(e.done))
		return wcs, err
	}
	e.tick(uint32(e.cfg.Spin))
	wcs, err := e.poller.PollSpin(e.cfg.Spin)
	e.done += len(wcs) // published at tick's next look
	return wcs, err
}

// waitEvent is poll's wait with Config.Events.
func (e *engine) waitEvent() ([]hand.WC, error) {
	// Background: a context that cannot end keeps the wait free of
	// allocations; the loops end by their counts, or by the peer watch,
	// which flushes the QP's WRs into the CQ.
	if e.cfg.Wait == ThreadWait {
		return e.poller.WaitThreadAtLeast(context.Background(), e.waitMin)
	}
	if e.drained {
		wait := e.cq.Wait
		if e.cfg.Wait == CQThreadWait {
			wait = e.cq.WaitThread
		}
		if err := wait(context.Background()); err != nil {
			return nil, err
		}
		if err := e.cq.RequestNotify(false); err != nil {
			return nil, err
		}
	}
	wcs, err := e.poller.Poll()
	e.drained = len(wcs) == 0
	return wcs, err
}

// progressed is the completions the loop has polled, as far as the peer
// watch can see them.
func (e *engine) progressed() int64 {
	if e.cprogress != nil {
		return atomic.LoadInt64(e.cprogress)
	}
	return e.progress.Load()
}

// bwClient posts Iters WRs of the mode as the sendPlan says, and returns
// the time from the first post to the last completion.
func (e *engine) bwClient() (time.Duration, error) {
	switch e.cfg.Loop {
	case CLoop:
		return e.cloopClient()
	case CgoLoop:
		return e.cgoClient()
	}
	cfg := e.cfg
	plan := cfg.sendPlan()
	var posted, done int
	start := time.Now()
	peak := peakMeter{last: start}
	for done < cfg.Iters {
		for n := plan.next(posted, done); n > 0; n = plan.next(posted, done) {
			v := e.send.Reserve(n)
			for i := range n {
				seq := posted + i
				var flags hand.SendFlags
				if plan.signaled(seq) {
					flags = hand.Signaled
				}
				switch cfg.Mode {
				case SendBW:
					v.SetSend(i, uint64(seq), flags, e.sge)
				case WriteBW:
					v.SetWrite(i, uint64(seq), flags, e.sge, e.raddr, e.rkey)
				case ReadBW:
					v.SetRead(i, uint64(seq), flags, e.sge, e.raddr, e.rkey)
				}
			}
			e.tick(1)
			if err := e.send.PostSend(e.qp); err != nil {
				e.send.Reset()
				return 0, fmt.Errorf("post send: %w", err)
			}
			posted += n
		}
		wcs, err := e.poll()
		if err != nil {
			return 0, err
		}
		for i := range wcs {
			if err := wcs[i].Err(); err != nil {
				return 0, fmt.Errorf("completion of WR %d: %w", wcs[i].WRID(), err)
			}
			done = int(wcs[i].WRID()) + 1
		}
		if len(wcs) > 0 {
			e.peak = max(e.peak, peak.rate(done, cfg.Size))
		}
	}
	return time.Since(start), nil
}

// peakMeter measures a client's rate between two polls that returned
// completions, for its best (engine.peak).
type peakMeter struct {
	last     time.Time
	lastDone int
}

// rate is the bytes a second since the last call (or the start), done
// WRs of size bytes being done now; 0 when no time passed.
func (m *peakMeter) rate(done, size int) float64 {
	now := time.Now()
	var r float64
	if dt := now.Sub(m.last).Seconds(); dt > 0 {
		r = float64((done-m.lastDone)*size) / dt
	}
	m.last, m.lastDone = now, done
	return r
}

// bwServer receives Iters sends, topping the receive queue up when half of
// it is used, and returns the time from the first receive to the last.
func (e *engine) bwServer() (time.Duration, error) {
	switch e.cfg.Loop {
	case CLoop:
		return e.cloopServer()
	case CgoLoop:
		return e.cgoServer()
	}
	var got int
	var start time.Time
	for got < e.cfg.Iters {
		wcs, err := e.poll()
		if err != nil {
			return 0, err
		}
		for i := range wcs {
			if err := wcs[i].Err(); err != nil {
				return 0, fmt.Errorf("receive %d: %w", got, err)
			}
		}
		if len(wcs) > 0 && got == 0 {
			start = time.Now()
		}
		got += len(wcs)
		e.posted -= len(wcs)
		if e.posted <= e.cfg.RxDepth/2 {
			if err := e.fillRecv(); err != nil {
				return 0, err
			}
		}
		e.waitMin = serverWaitMin(e.cfg.WaitMin, got, e.cfg.Iters, e.posted)
	}
	return time.Since(start), nil
}

// serverWaitMin is how many receives the send_bw server's next thread
// wait returns with, at least (hand.Poller.WaitThreadAtLeast), once it has
// got some of iters, with posted receives posted: want (-wait-min), but 1
// for the first, whose return starts the server's clock, and never more
// than are left, which would wait for ever, or than half of those posted,
// so that the queue is refilled before it runs dry (an RNR NAK, and the
// sender's wait for its retry). Waiting for more than one in C saves a
// crossing into C and hand's wait for every receive but the last of them
// (BENCHMARKS.md, "Known gaps": 0.97 of perftest's rate at 64 B, against
// 0.96 with a return at every wake).
func serverWaitMin(want, got, iters, posted int) int {
	if want == 1 || got == 0 {
		return 1
	}
	return max(1, min(want, iters-got, posted/2))
}

// latency runs Iters send ping-pongs: the client sends and waits for the
// answer, timing each round trip; the server answers each message.
func (e *engine) latency(client bool) error {
	// The starts are kept on the kernel's CLOCK_MONOTONIC, which perf
	// record -k CLOCK_MONOTONIC stamps its events with, as offsets from one
	// reading of it: Go's monotonic clock is the same one, but does not
	// show its value.
	var anchor int64
	base := time.Now()
	if e.starts != nil {
		anchor = monotonicNanos()
	}
	for i := range e.cfg.Iters {
		t0 := time.Now()
		if e.starts != nil {
			e.starts[i] = anchor + int64(t0.Sub(base))
		}
		if client {
			if err := e.sendOne(i); err != nil {
				return err
			}
		}
		if err := e.waitRecv(); err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
		if !client {
			if err := e.sendOne(i); err != nil {
				return err
			}
		}
		e.lat[i] = time.Since(t0)
	}
	return e.reapSends()
}

// reapSends polls until every send the latency loop posted has completed,
// after its timed part. The side that answers posts its last message as the
// loop ends, and a send is not out until its completion says so: with rxe
// on a workqueue (kernel 6.12 and later) a kworker sends it, and on one CPU
// the sender's own work after the loop (the allocation count's collections,
// its report) kept that kworker waiting for 0.5-2 ms, which the peer timed
// as its last round trip. Waiting here lets the message go first, as any
// sender must before it reuses the buffer or tears the queue pair down.
func (e *engine) reapSends() error {
	for e.sendsOut > 0 {
		wcs, err := e.poll()
		if err != nil {
			return err
		}
		if _, err := e.count(wcs); err != nil {
			return err
		}
	}
	return nil
}

// count takes the latency loop's polled completions off what it has
// outstanding, receives off posted and sends off sendsOut, and returns how
// many were receives; an unsuccessful completion is the error.
func (e *engine) count(wcs []hand.WC) (recvs int, err error) {
	for i := range wcs {
		if err := wcs[i].Err(); err != nil {
			return recvs, err
		}
		if wcs[i].IsRecv() {
			recvs++
			e.posted--
		} else {
			e.sendsOut--
		}
	}
	return recvs, nil
}

// sendOne posts one signaled send; waitRecv reaps its completion, or, for
// the loop's last sends, reapSends.
func (e *engine) sendOne(i int) error {
	e.send.Reserve(1).SetSend(0, uint64(i), hand.Signaled, e.sge)
	e.tick(1)
	if err := e.send.PostSend(e.qp); err != nil {
		e.send.Reset()
		return fmt.Errorf("post send: %w", err)
	}
	e.sent++
	e.sendsOut++
	return nil
}

// latRefill is how many receives the latency loop reposts at once. perftest
// reposts one a message; refilling half the queue (256 WRs) in one post, as
// the bandwidth server does, made one round trip in 256 three times the
// median under -icount (about 104 us at 64 B, the rxe provider writing 256
// WRs), which set send_lat's maximum. 16 at a time costs one post a 16
// messages and no round trip more than a few microseconds.
const latRefill = 16

// latNeedsRefill reports whether the latency loop tops its receive queue of
// rxDepth up, posted receives being left after a message: when latRefill
// are used, or, in a queue that small, all but one. The peer sends one
// message and waits for the answer, so the one left takes the next message;
// none left, the peer's send would wait on RNR retries for ever.
func latNeedsRefill(posted, rxDepth int) bool {
	return posted <= rxDepth-min(latRefill, rxDepth-1)
}

// waitRecv polls (or waits, with Config.Events) until a receive completes,
// reaping send completions on the way, and keeps the receive queue topped
// up.
func (e *engine) waitRecv() error {
	for {
		wcs, err := e.poll()
		if err != nil {
			return err
		}
		recvs, err := e.count(wcs)
		if err != nil {
			return err
		}
		if recvs > 0 {
			if latNeedsRefill(e.posted, e.cfg.RxDepth) {
				return e.fillRecv()
			}
			return nil
		}
	}
}
