package rxe

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/tests/internal/testkit"
)

// Close racing every use. Each round makes a world on a Context of its own
// (a completion channel, two CQs on it, a PD, an MR and an RC pair
// connected to each other) and starts a goroutine for each kind of use:
// a sender and a receiver posting, pollers (Poll, PollSpin), a waiter in
// every waiting mode (Poller.Wait, WaitThread, WaitThreadAtLeast, CQ.Wait,
// CQ.WaitThread, CompChannel.Wait, CompChannel.WaitThread, and the async
// events, NextEvent or Events), a registerer (PD.Alloc and MR.Close) and
// the control path (AllocPD, NewCQ, QueryPort, QP.State, each child closed
// at once). After a random 0-3 ms the closer closes the round's target
// (QP, CQ, channel, PD and Context in turn, so each is the target of a
// fifth of the rounds); where Close says *BusyError it closes the children
// named, in random order with random pauses, and tries again; then it
// closes what is left, in random order. Every call must return its result,
// ErrClosed, or, for Close on an object with live children, a *BusyError;
// every worker must return once its object is closed, a blocked waiter
// within closeWakeBound of the start of the Close that ended its wait; and
// the device's objects (`rdma resource`), the process's file descriptors
// and its goroutines must come back to where they were.
//
// Rounds: closeRounds (1000) in the normal build; fewer under the race
// detector, which slows the Go side several times over, and with
// -test.short (the release matrix, emulated arm64 among its roots).
// GOVERBS_CLOSE_ROUNDS sets the count; GOVERBS_CLOSE_SEED replays a run's
// timing (the seed is printed).
func TestControlConcurrentClose(t *testing.T) {
	dev, gidIndex := RequireDevice(t)
	rounds := closeRounds(t)
	seed := time.Now().UnixNano()
	if s := os.Getenv("GOVERBS_CLOSE_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, "GOVERBS_CLOSE_SEED=%q", s)
		seed = v
	}
	t.Logf("seed %d (GOVERBS_CLOSE_SEED=%d replays this run's timing), %d rounds, race build %v", seed, seed, rounds, raceBuild)
	rng := rand.New(rand.NewSource(seed))

	var tally closeTally
	base := closeBaseline(t, dev)
	start := time.Now()
	for i := range rounds {
		target := closeKind(i % int(numCloseKinds))
		rs := time.Now()
		closeRound(t, &tally, rng, dev, gidIndex, i, target)
		if os.Getenv("GOVERBS_CLOSE_VERBOSE") != "" {
			t.Logf("round %d (%s): %v", i, target, time.Since(rs))
		}
		if t.Failed() {
			t.Fatalf("round %d (target %s, seed %d) failed: %s", i, target, seed, tally.failureText())
		}
		if (i+1)%250 == 0 && i+1 < rounds {
			closeCheckBaseline(t, dev, base, fmt.Sprintf("after %d rounds", i+1))
		}
	}
	elapsed := time.Since(start)
	closeCheckBaseline(t, dev, base, fmt.Sprintf("after all %d rounds", rounds))
	t.Logf("%d rounds in %v (%v a round)", rounds, elapsed.Round(time.Millisecond), (elapsed / time.Duration(rounds)).Round(time.Microsecond))
	tally.report(t, rounds)
}

// closeRounds is how many rounds to run: see TestControlConcurrentClose.
func closeRounds(t *testing.T) int {
	if s := os.Getenv("GOVERBS_CLOSE_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "GOVERBS_CLOSE_ROUNDS=%q", s)
		require.Positive(t, n, "GOVERBS_CLOSE_ROUNDS")
		return n
	}
	switch {
	case testing.Short():
		return 15
	case raceBuild:
		return 50
	}
	return 125
}

// closeWakeBound is how long a waiter blocked on an object may take to
// return after the Close that ends its wait began; closeJoinBound how long
// the round waits for every worker once everything is closed.
const (
	closeWakeBound = 2 * time.Second
	closeJoinBound = 5 * time.Second
	// closeRetryBound is how long the closer tries again a Close that a
	// worker's child (an MR, a PD, a CQ, each closed at once) refuses.
	closeRetryBound = 5 * time.Second
)

// The kinds of object a round targets.
type closeKind int

const (
	closeQP closeKind = iota
	closeCQ
	closeChannel
	closePD
	closeContext
	numCloseKinds
)

func (k closeKind) String() string {
	return [...]string{"QP", "CQ", "CompChannel", "PD", "Context"}[k]
}

// The calls the workers and the closer make, whose outcomes are counted.
type closeCall int

const (
	callPostSend closeCall = iota
	callPostRecv
	callPoll
	callPollSpin
	callPollerWait
	callPollerWaitThread
	callPollerWaitThreadAtLeast
	callCQWait
	callCQWaitThread
	callCQPoll
	callCQRequestNotify
	callChannelWait
	callChannelWaitThread
	callNextEvent
	callEvents
	callPDAlloc
	callMRClose
	callAllocPD
	callNewCQ
	callQueryPort
	callQPState
	callCloseQP
	callCloseCQ
	callCloseChannel
	callClosePD
	callCloseMR
	callCloseContext
	numCloseCalls
)

var closeCallNames = [numCloseCalls]string{
	"SendChain.PostSend", "RecvChain.PostRecv", "Poller.Poll", "Poller.PollSpin",
	"Poller.Wait", "Poller.WaitThread", "Poller.WaitThreadAtLeast",
	"CQ.Wait", "CQ.WaitThread", "CQ.Poll", "CQ.RequestNotify",
	"CompChannel.Wait", "CompChannel.WaitThread", "Context.NextEvent", "Context.Events",
	"PD.Alloc", "MR.Close (registerer's)", "Context.AllocPD (+PD.Close)", "Context.NewCQ (+CQ.Close)",
	"Context.QueryPort", "QP.State",
	"QP.Close", "CQ.Close", "CompChannel.Close", "PD.Close", "MR.Close", "Context.Close",
}

func (c closeCall) String() string { return closeCallNames[c] }

// The outcomes of a call.
const (
	outResult = iota
	outClosed
	outBusy
	numOutcomes
)

// closeTally counts outcomes across rounds; workers add to it at once.
type closeTally struct {
	calls   [numCloseCalls][numOutcomes]atomic.Int64
	targets [numCloseKinds]int // rounds by target
	// Where the first Close attempt on the target said *BusyError.
	targetBusy [numCloseKinds]int

	mu       sync.Mutex
	failures []string
	maxWake  time.Duration
	wakeWho  string
	wakes    int // waits that Close ended
	maxJoin  time.Duration
}

// outcome counts err for call and reports whether it ended the caller's
// use of its object (ErrClosed). Anything but nil, ErrClosed and, where
// busyOK, a *BusyError is a failure.
func (ty *closeTally) outcome(call closeCall, err error, busyOK bool) (closed bool) {
	var be *hand.BusyError
	switch {
	case err == nil:
		ty.calls[call][outResult].Add(1)
	case errors.Is(err, hand.ErrClosed):
		ty.calls[call][outClosed].Add(1)
		return true
	case busyOK && errors.As(err, &be) && len(be.Children) > 0 && errors.Is(err, syscall.EBUSY):
		ty.calls[call][outBusy].Add(1)
	default:
		ty.fail("%s: %v (%T)", call, err, err)
	}
	return false
}

func (ty *closeTally) fail(format string, args ...any) {
	ty.mu.Lock()
	if len(ty.failures) < 20 {
		ty.failures = append(ty.failures, fmt.Sprintf(format, args...))
	}
	ty.mu.Unlock()
}

func (ty *closeTally) failed() bool {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	return len(ty.failures) > 0
}

func (ty *closeTally) failureText() string {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	return strings.Join(ty.failures, "; ")
}

// woke records that a waiter (who) returned ErrClosed took d after the
// start of the Close that ended its wait.
func (ty *closeTally) woke(who string, d time.Duration) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	ty.wakes++
	if d > ty.maxWake {
		ty.maxWake, ty.wakeWho = d, who
	}
	if d > closeWakeBound {
		ty.failures = append(ty.failures, fmt.Sprintf("%s returned %v after its object's Close began (bound %v)", who, d, closeWakeBound))
	}
}

func (ty *closeTally) report(t *testing.T, rounds int) {
	var b strings.Builder
	b.WriteString("rounds by target (first Close said *BusyError):")
	for k := range numCloseKinds {
		fmt.Fprintf(&b, " %s %d (%d)", k, ty.targets[k], ty.targetBusy[k])
	}
	fmt.Fprintf(&b, "\nsuccessful closes: QP %d, CQ %d, CompChannel %d, PD %d, MR %d, Context %d; total %d",
		ty.calls[callCloseQP][outResult].Load(), ty.calls[callCloseCQ][outResult].Load(),
		ty.calls[callCloseChannel][outResult].Load(), ty.calls[callClosePD][outResult].Load(),
		ty.calls[callCloseMR][outResult].Load(), ty.calls[callCloseContext][outResult].Load(),
		ty.calls[callCloseQP][outResult].Load()+ty.calls[callCloseCQ][outResult].Load()+
			ty.calls[callCloseChannel][outResult].Load()+ty.calls[callClosePD][outResult].Load()+
			ty.calls[callCloseMR][outResult].Load()+ty.calls[callCloseContext][outResult].Load())
	b.WriteString("\noutcomes per call (result / ErrClosed / BusyError):")
	for c := range numCloseCalls {
		fmt.Fprintf(&b, "\n  %-30s %9d / %5d / %5d", c, ty.calls[c][outResult].Load(), ty.calls[c][outClosed].Load(), ty.calls[c][outBusy].Load())
	}
	fmt.Fprintf(&b, "\nwaits ended by Close: %d; the longest took %v (%s); the longest join of a round's workers after its last Close: %v",
		ty.wakes, ty.maxWake.Round(time.Microsecond), ty.wakeWho, ty.maxJoin.Round(time.Microsecond))
	t.Log(b.String())
	// Each call kind must have been made and, once its object was closed,
	// refused: a worker that never ran, or never saw its object go,
	// proves nothing.
	for c := range numCloseCalls {
		switch c {
		case callMRClose, callCloseMR, callCloseQP, callCloseCQ, callCloseChannel, callClosePD, callCloseContext:
			require.Positive(t, ty.calls[c][outResult].Load(), "%s never succeeded", c)
		case callEvents, callNextEvent, callCQRequestNotify, callCQPoll:
			// The async events carry none here unless the device has one
			// to say; their end is what counts. A RequestNotify or a
			// CQ.Poll after a wait meets a closed CQ only by chance.
			require.Positive(t, ty.calls[c][outResult].Load()+ty.calls[c][outClosed].Load(), "%s never returned", c)
		default:
			// The waits share the channel's events, so a few rounds may
			// give one of them none; from 50 on each has had some.
			if rounds >= 50 {
				require.Positive(t, ty.calls[c][outResult].Load(), "%s never returned a result", c)
			}
			require.Positive(t, ty.calls[c][outClosed].Load(), "%s never returned ErrClosed", c)
		}
	}
	require.Positive(t, ty.calls[callClosePD][outBusy].Load(), "PD.Close never met a live child")
	require.Positive(t, ty.calls[callCloseContext][outBusy].Load(), "Context.Close never met a live child")
}

// closeNode is an object of a round's world, for the closer.
type closeNode struct {
	name     string
	call     closeCall // its Close's
	obj      interface{ Close() error }
	children []*closeNode
	closed   chan struct{} // closed once Close succeeded
	done     bool          // the closer's own record of that
	// attempt is when the latest Close attempt began (UnixNano): the
	// last one is the one that succeeded, whose start a waiter ended by
	// it measures its wake from. attempts counts them, and won is the
	// count at the one that succeeded: a wait that returned ErrClosed
	// during an earlier one was ended by a Close that then failed.
	attempt  atomic.Int64
	attempts atomic.Int64
	won      int64
}

func newCloseNode(name string, call closeCall, obj interface{ Close() error }, children ...*closeNode) *closeNode {
	return &closeNode{name: name, call: call, obj: obj, children: children, closed: make(chan struct{})}
}

// since is how long ago n's latest Close attempt began.
func (n *closeNode) since() time.Duration {
	return time.Duration(time.Now().UnixNano() - n.attempt.Load())
}

// closeWorld is what a round makes.
type closeWorld struct {
	ctx      *hand.Context
	ch       *hand.CompChannel
	cqS, cqR *hand.CQ // the sender's and the receiver's
	pd       *hand.PD
	mr       *hand.MR
	a, b     *hand.QP // a sends to b

	nCtx, nCh, nCQS, nCQR, nPD, nMR, nA, nB *closeNode
}

func newCloseWorld(t *testing.T, dev string, gidIndex int) *closeWorld {
	t.Helper()
	w := &closeWorld{}
	var err error
	w.ctx, err = hand.Open(dev)
	require.NoError(t, err)
	gid, err := w.ctx.RoCEv2IPv4GID(1)
	require.NoError(t, err)
	w.ch, err = w.ctx.NewCompChannel()
	require.NoError(t, err)
	w.cqS, err = w.ctx.NewCQ(128, hand.CQOptions{Channel: w.ch})
	require.NoError(t, err)
	w.cqR, err = w.ctx.NewCQ(256, hand.CQOptions{Channel: w.ch})
	require.NoError(t, err)
	w.pd, err = w.ctx.AllocPD()
	require.NoError(t, err)
	w.mr, err = w.pd.Alloc(1<<16, hand.AccessLocalWrite)
	require.NoError(t, err)
	w.a, err = w.pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: w.cqS, Caps: hand.QPCaps{MaxSendWR: closeSendDepth, MaxRecvWR: 1}})
	require.NoError(t, err)
	w.b, err = w.pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: w.cqR, Caps: hand.QPCaps{MaxSendWR: 1, MaxRecvWR: closeRecvDepth}})
	require.NoError(t, err)
	pa, pb := hand.RandomPSN(), hand.RandomPSN()
	require.NoError(t, w.a.Connect(hand.ConnectAttr{SGIDIndex: gidIndex, Access: hand.AccessLocalWrite, PSN: pa,
		Remote: hand.Endpoint{QPN: w.b.Num(), PSN: pb, GID: gid.GID}}))
	require.NoError(t, w.b.Connect(hand.ConnectAttr{SGIDIndex: gidIndex, Access: hand.AccessLocalWrite, PSN: pb,
		Remote: hand.Endpoint{QPN: w.a.Num(), PSN: pa, GID: gid.GID}}))

	w.nA = newCloseNode("QP a (sender)", callCloseQP, w.a)
	w.nB = newCloseNode("QP b (receiver)", callCloseQP, w.b)
	w.nMR = newCloseNode("MR", callCloseMR, w.mr)
	w.nCQS = newCloseNode("CQ of a", callCloseCQ, w.cqS, w.nA)
	w.nCQR = newCloseNode("CQ of b", callCloseCQ, w.cqR, w.nB)
	w.nPD = newCloseNode("PD", callClosePD, w.pd, w.nA, w.nB, w.nMR)
	w.nCh = newCloseNode("CompChannel", callCloseChannel, w.ch, w.nCQS, w.nCQR)
	w.nCtx = newCloseNode("Context", callCloseContext, w.ctx, w.nCh, w.nCQS, w.nCQR, w.nPD)
	return w
}

func (w *closeWorld) nodes() []*closeNode {
	return []*closeNode{w.nA, w.nB, w.nMR, w.nCQS, w.nCQR, w.nPD, w.nCh, w.nCtx}
}

// closeIdle is the pause of a worker that polls or loops on the control
// path: without it, on the VM's two CPUs under TCG, the workers' system
// calls leave the closer and the device little time, and a round takes
// ten times as long.
const closeIdle = 500 * time.Microsecond

// The queue depths, and so the credits of the sender and the receiver
// poster, which keep the queues from overflowing.
const (
	closeSendDepth = 32
	closeRecvDepth = 64
	closeMsg       = 64
)

// closeCloser is the round's closer; it alone uses rng.
type closeCloser struct {
	t   *testing.T
	ty  *closeTally
	rng *rand.Rand
}

func (c *closeCloser) pause(max time.Duration) {
	if d := time.Duration(c.rng.Int63n(int64(max) + 1)); d > 0 {
		time.Sleep(d)
	}
}

// close closes n: on a *BusyError it closes n's children that are still
// open, in random order with random pauses, and tries again, until Close
// succeeds (children the workers make and close themselves may say
// *BusyError a few more times). It reports whether the first attempt was
// refused.
func (c *closeCloser) close(n *closeNode) (firstBusy bool) {
	if n.done {
		return false
	}
	deadline := time.Now().Add(closeRetryBound)
	backoff := 50 * time.Microsecond
	for attempt := 0; ; attempt++ {
		n.attempt.Store(time.Now().UnixNano())
		seq := n.attempts.Add(1)
		err := n.obj.Close()
		c.ty.outcome(n.call, err, true)
		if err == nil {
			n.done = true
			n.won = seq
			close(n.closed)
			return firstBusy
		}
		var be *hand.BusyError
		if !errors.As(err, &be) {
			return attempt == 0 // counted as a failure already
		}
		if attempt == 0 {
			firstBusy = true
		}
		if time.Now().After(deadline) {
			c.ty.fail("%s: Close still says %v after %v", n.name, err, closeRetryBound)
			return firstBusy
		}
		open := slices.DeleteFunc(slices.Clone(n.children), func(k *closeNode) bool { return k.done })
		if len(open) == 0 {
			// Only what the workers make (an MR, a PD, a CQ) is left,
			// each closed by its maker at once. Backing off leaves the
			// waits woken by the failed attempt time to go on.
			time.Sleep(backoff)
			backoff = min(2*backoff, 2*time.Millisecond)
			continue
		}
		c.rng.Shuffle(len(open), func(i, j int) { open[i], open[j] = open[j], open[i] })
		for _, k := range open {
			c.pause(300 * time.Microsecond)
			c.close(k)
		}
	}
}

// closeRound runs round i on a new world, closing target first.
func closeRound(t *testing.T, ty *closeTally, rng *rand.Rand, dev string, gidIndex, i int, target closeKind) {
	t0 := time.Now()
	w := newCloseWorld(t, dev, gidIndex)
	t1 := time.Now()
	// A wait whose ctx can end takes other paths (the hook that cancels
	// it, the queued poll of WaitThreadAtLeast): half the rounds use one,
	// cancelled only to rescue a wait that Close did not end.
	waitCtx := context.Background()
	rescue := func() {}
	if rng.Intn(2) == 1 {
		waitCtx, rescue = context.WithCancel(context.Background())
	}
	defer rescue()
	events := i%2 == 0 // Events or NextEvent: a Context serves one of them

	var wg sync.WaitGroup
	var running sync.Map // worker name -> struct{}
	spawn := func(name string, f func()) {
		wg.Add(1)
		running.Store(name, struct{}{})
		go func() {
			defer wg.Done()
			defer running.Delete(name)
			f()
		}()
	}
	// woke measures a waiter's return from n's Close, and notes which
	// attempt it was.
	type wake struct {
		who string
		n   *closeNode
		seq int64
	}
	var wakesMu sync.Mutex
	var wakes []wake
	woke := func(who string, n *closeNode) {
		seq := n.attempts.Load()
		ty.woke(who, n.since())
		wakesMu.Lock()
		wakes = append(wakes, wake{who, n, seq})
		wakesMu.Unlock()
	}

	sendCredits := make(chan struct{}, closeSendDepth)
	recvCredits := make(chan struct{}, closeRecvDepth)
	for range closeSendDepth {
		sendCredits <- struct{}{}
	}
	for range closeRecvDepth {
		recvCredits <- struct{}{}
	}
	// give hands back the credits of k completions of cq.
	give := func(cq *hand.CQ, k int) {
		credits := sendCredits
		if cq == w.cqR {
			credits = recvCredits
		}
		for range k {
			select {
			case credits <- struct{}{}:
			default: // a completion of a WR posted before a lost one: never more than the depth
			}
		}
	}
	sge := w.mr.SGE(0, closeMsg)
	rsge := w.mr.SGE(closeMsg, closeMsg)

	spawn("sender", func() {
		sc, err := hand.NewSendChain(1, 1, 0)
		if err != nil {
			ty.fail("NewSendChain: %v", err)
			return
		}
		defer sc.Close()
		for id := uint64(0); ; id++ {
			select {
			case <-sendCredits:
			case <-w.nA.closed:
			}
			sc.Reserve(1).SetSend(0, id, hand.Signaled, sge) // a post empties the chain, but for ErrClosed, which ends the loop
			if ty.outcome(callPostSend, sc.PostSend(w.a), false) {
				return
			}
		}
	})
	spawn("receiver", func() {
		rc, err := hand.NewRecvChain(1, 1)
		if err != nil {
			ty.fail("NewRecvChain: %v", err)
			return
		}
		defer rc.Close()
		for id := uint64(0); ; id++ {
			select {
			case <-recvCredits:
			case <-w.nB.closed:
			}
			rc.Reserve(1).Set(0, id, rsge)
			if ty.outcome(callPostRecv, rc.PostRecv(w.b), false) {
				return
			}
		}
	})
	// poller runs f, a use of a Poller of cq, until ErrClosed.
	poller := func(name string, cq *hand.CQ, n *closeNode, call closeCall, waits bool, f func(p *hand.Poller) ([]hand.WC, error)) {
		p, err := hand.NewPoller(cq, 16) // before the race: its CQ is open
		require.NoError(t, err)
		spawn(name, func() {
			defer p.Close()
			for {
				wcs, err := f(p)
				if ty.outcome(call, err, false) {
					if waits {
						woke(name, n)
					}
					return
				}
				give(cq, len(wcs))
				if len(wcs) == 0 && !waits {
					time.Sleep(closeIdle) // not a spin that starves the rest
				}
			}
		})
	}
	poller("Poller.Poll on a's CQ", w.cqS, w.nCQS, callPoll, false, (*hand.Poller).Poll)
	poller("Poller.PollSpin on b's CQ", w.cqR, w.nCQR, callPollSpin, false, func(p *hand.Poller) ([]hand.WC, error) { return p.PollSpin(16) })
	poller("Poller.Wait on a's CQ", w.cqS, w.nCQS, callPollerWait, true, func(p *hand.Poller) ([]hand.WC, error) { return p.Wait(waitCtx) })
	poller("Poller.WaitThread on a's CQ", w.cqS, w.nCQS, callPollerWaitThread, true, func(p *hand.Poller) ([]hand.WC, error) { return p.WaitThread(waitCtx) })
	poller("Poller.WaitThreadAtLeast on b's CQ", w.cqR, w.nCQR, callPollerWaitThreadAtLeast, true, func(p *hand.Poller) ([]hand.WC, error) {
		return p.WaitThreadAtLeast(waitCtx, 4)
	})
	// drain polls cq empty with CQ.Poll, as a program does after an
	// event, and reports whether it met the CQ closed.
	drain := func(cq *hand.CQ, wc []verbs.WC) bool {
		for {
			k, err := cq.Poll(wc)
			if ty.outcome(callCQPoll, err, false) {
				return true
			}
			give(cq, k)
			if k == 0 {
				return false
			}
		}
	}
	cqWaiter := func(name string, cq *hand.CQ, n *closeNode, call closeCall, wait func(context.Context) error) {
		spawn(name, func() {
			wc := make([]verbs.WC, 16)
			for {
				if ty.outcome(callCQRequestNotify, cq.RequestNotify(false), false) || drain(cq, wc) {
					return
				}
				if ty.outcome(call, wait(waitCtx), false) {
					woke(name, n)
					return
				}
			}
		})
	}
	cqWaiter("CQ.Wait on b's CQ", w.cqR, w.nCQR, callCQWait, w.cqR.Wait)
	cqWaiter("CQ.WaitThread on a's CQ", w.cqS, w.nCQS, callCQWaitThread, w.cqS.WaitThread)
	chWaiter := func(name string, call closeCall, wait func(context.Context) (*hand.CQ, error)) {
		spawn(name, func() {
			wc := make([]verbs.WC, 16)
			for {
				cq, err := wait(waitCtx)
				if ty.outcome(call, err, false) {
					woke(name, w.nCh)
					return
				}
				// The event disarmed its CQ, which the waiters of that
				// CQ may be waiting on: arm it again, and reap.
				if !ty.outcome(callCQRequestNotify, cq.RequestNotify(false), false) {
					drain(cq, wc)
				}
			}
		})
	}
	chWaiter("CompChannel.Wait", callChannelWait, w.ch.Wait)
	chWaiter("CompChannel.WaitThread", callChannelWaitThread, w.ch.WaitThread)
	if events {
		spawn("Context.Events", func() {
			for range w.ctx.Events(waitCtx) {
				ty.calls[callEvents][outResult].Add(1)
			}
			// The channel closes when NextEvent fails: ErrClosed, unless
			// the rescue cancelled waitCtx.
			if waitCtx.Err() != nil {
				ty.fail("Context.Events: ended by the rescue, not by Close")
				return
			}
			ty.calls[callEvents][outClosed].Add(1)
			woke("Context.Events", w.nCtx)
		})
	} else {
		spawn("Context.NextEvent", func() {
			for {
				_, err := w.ctx.NextEvent(waitCtx)
				if ty.outcome(callNextEvent, err, false) {
					woke("Context.NextEvent", w.nCtx)
					return
				}
			}
		})
	}
	spawn("registerer", func() {
		for {
			mr, err := w.pd.Alloc(4096, hand.AccessLocalWrite)
			if ty.outcome(callPDAlloc, err, false) {
				return
			}
			if err == nil {
				ty.outcome(callMRClose, mr.Close(), false)
			}
			time.Sleep(closeIdle)
		}
	})
	spawn("control", func() {
		for {
			pd, err := w.ctx.AllocPD()
			if ty.outcome(callAllocPD, err, false) {
				return
			}
			if err == nil {
				ty.outcome(callAllocPD, pd.Close(), false)
			}
			// On the channel, while it lasts: a child of it too. Its
			// ErrClosed ends nothing: the Context may be open still.
			var o hand.CQOptions
			select {
			case <-w.nCh.closed:
			default:
				o.Channel = w.ch
			}
			cq, err := w.ctx.NewCQ(1, o)
			ty.outcome(callNewCQ, err, false)
			if err == nil {
				ty.outcome(callNewCQ, cq.Close(), false)
			}
			if _, err := w.ctx.QueryPort(1); ty.outcome(callQueryPort, err, false) {
				return
			}
			time.Sleep(2 * closeIdle)
		}
	})
	for _, q := range []struct {
		qp *hand.QP
		n  *closeNode
	}{{w.a, w.nA}, {w.b, w.nB}} {
		spawn("QP.State of "+q.n.name, func() {
			for {
				if _, err := q.qp.State(); ty.outcome(callQPState, err, false) {
					return
				}
				time.Sleep(2 * closeIdle)
			}
		})
	}

	t2 := time.Now()
	// The race: the target goes at a random time, then everything else.
	c := &closeCloser{t: t, ty: ty, rng: rng}
	c.pause(3 * time.Millisecond)
	first := map[closeKind]*closeNode{closeQP: w.nA, closeCQ: w.nCQS, closeChannel: w.nCh, closePD: w.nPD, closeContext: w.nCtx}[target]
	if target == closeQP && rng.Intn(2) == 1 {
		first = w.nB
	}
	if target == closeCQ && rng.Intn(2) == 1 {
		first = w.nCQR
	}
	ty.targets[target]++
	if c.close(first) {
		ty.targetBusy[target]++
	}
	rest := w.nodes()
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	for _, n := range rest {
		c.pause(500 * time.Microsecond)
		c.close(n)
	}
	closedAt := time.Now()

	joined := make(chan struct{})
	go func() { wg.Wait(); close(joined) }()
	select {
	case <-joined:
		d := time.Since(closedAt)
		ty.mu.Lock()
		ty.maxJoin = max(ty.maxJoin, d)
		ty.mu.Unlock()
	case <-time.After(closeJoinBound):
		var stuck []string
		running.Range(func(k, _ any) bool { stuck = append(stuck, k.(string)); return true })
		slices.Sort(stuck)
		var dump strings.Builder
		pprof.Lookup("goroutine").WriteTo(&dump, 1)
		ty.fail("round %d: %v after every object was closed, these have not returned: %s", i, closeJoinBound, strings.Join(stuck, ", "))
		t.Logf("goroutines:\n%s", dump.String())
		rescue()
		select {
		case <-joined:
		case <-time.After(closeJoinBound):
		}
	}
	for _, k := range wakes {
		if k.seq != k.n.won {
			ty.fail("%s returned ErrClosed during Close attempt %d of %s, which failed (attempt %d closed it)", k.who, k.seq, k.n.name, k.n.won)
		}
	}
	if os.Getenv("GOVERBS_CLOSE_VERBOSE") != "" {
		t.Logf("world %v, spawn %v, closes %v, join %v", t1.Sub(t0), t2.Sub(t1), closedAt.Sub(t2), time.Since(closedAt))
	}
	if ty.failed() {
		t.Fail()
	}
}

// closeBase is what must come back: the device's objects, the process's
// file descriptors and goroutines.
type closeBase struct {
	rdma       map[string]int
	fds        int
	goroutines int
}

func closeBaseline(t *testing.T, dev string) closeBase {
	return closeBase{rdma: testkit.ResourceCounts(t, dev), fds: closeFDs(t), goroutines: runtime.NumGoroutine()}
}

func closeFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents) - 1 // ReadDir's own
}

// closeCheckBaseline fails unless, within a few seconds, everything is
// back to base (a goroutine's exit, the kernel's release of an object,
// follow a Close by a little).
func closeCheckBaseline(t *testing.T, dev string, base closeBase, when string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		now := closeBaseline(t, dev)
		same := now.fds == base.fds && now.goroutines <= base.goroutines && len(now.rdma) == len(base.rdma)
		for k, v := range base.rdma {
			same = same && now.rdma[k] == v
		}
		if same {
			t.Logf("%s: rdma resources %v, %d fds, %d goroutines: as before", when, now.rdma, now.fds, now.goroutines)
			return
		}
		if time.Now().After(deadline) {
			var dump strings.Builder
			pprof.Lookup("goroutine").WriteTo(&dump, 1)
			t.Fatalf("%s: rdma resources %v, %d fds, %d goroutines; before: %v, %d, %d\ngoroutines:\n%s",
				when, now.rdma, now.fds, now.goroutines, base.rdma, base.fds, base.goroutines, dump.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
