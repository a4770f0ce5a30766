package rxe

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand"
)

// The load of the concurrent-use tests: 16 goroutines post sends in chains
// of 1 to 64 WRs, 4 post receives, 2 poll the one CQ every completion goes
// to. Under TCG, on a busy 2-core host, they ran at 37,000-71,000
// messages/s on one QP and 58,000-107,000 on eight: a million took 27 s
// and 17 s, so make test sends half that, keeping its run within its time.
// The race detector slows the Go side five- to sevenfold, so a race build
// sends 100,000 (13 s and 7 s). With -test.short (the release matrix,
// whose five roots, two of them emulated arm64, prove the verbs across
// releases, not under load) it sends 20,000. GOVERBS_CONCURRENT_MESSAGES
// sets the count (1000000 for the full million; any count is rounded down
// to a multiple of the 16 senders).
const (
	concSenders     = 16
	concRecvPosters = 4
	concPollers     = 2
	concMaxChain    = 64
	concSendDepth   = 512  // each send QP's MaxSendWR: the senders' credits
	concRecvSlots   = 2048 // receive buffers, each posted again only once its completion was polled
	concSlotSize    = 64
	concPayload     = 16 // sender, index, and a check word of both
)

func concMessages(t *testing.T) int {
	n := 500_000
	if raceBuild {
		n = 100_000
	}
	if testing.Short() {
		n = 20_000
	}
	if s := os.Getenv("GOVERBS_CONCURRENT_MESSAGES"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "GOVERBS_CONCURRENT_MESSAGES")
		require.GreaterOrEqual(t, v, concSenders, "GOVERBS_CONCURRENT_MESSAGES: at least a message per sender")
		n = v
	}
	return n - n%concSenders // an equal share for each sender
}

// Concurrent use of one RC QP: every send and every receive WR completes
// exactly once (by wr_id), every message arrives exactly once with its
// bytes, and each sender's messages and send completions come back in the
// order it posted them, as RC promises per QP: each poller sees them in
// increasing order (what one poller reaps of the CQ is in the CQ's order;
// between pollers, and between senders, the order is not observable).
func TestConcurrentRCOneQP(t *testing.T) { runConcurrent(t, 1, false) }

// The same with the receives on one SRQ shared by 8 QPs: 8 RC pairs, two
// senders on each sending QP, 4 goroutines posting to the SRQ.
func TestConcurrentRCSharedSRQ(t *testing.T) { runConcurrent(t, 8, true) }

// credits bound the WRs a send queue holds: a sender takes as many as its
// chain has WRs before it posts, a poller gives one back per send
// completion, so no post finds the queue full.
type credits struct {
	mu   sync.Mutex
	cond sync.Cond
	free int
	stop bool
}

func newCredits(n int) *credits {
	c := &credits{free: n}
	c.cond.L = &c.mu
	return c
}

func (c *credits) take(k int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.free < k && !c.stop {
		c.cond.Wait()
	}
	c.free -= k
	return !c.stop
}

func (c *credits) give(k int) {
	c.mu.Lock()
	c.free += k
	c.mu.Unlock()
	c.cond.Broadcast()
}

func (c *credits) halt() {
	c.mu.Lock()
	c.stop = true
	c.mu.Unlock()
	c.cond.Broadcast()
}

func concCheck(g, i uint32) uint64 { return uint64(g)<<40 ^ uint64(i)*0x9e3779b97f4a7c15 }

func runConcurrent(t *testing.T, nqp int, useSRQ bool) {
	r := newCtlRig(t)
	n := concMessages(t)
	per := n / concSenders
	cq, err := r.ctx.NewCQ(nqp*concSendDepth+concRecvSlots, hand.CQOptions{})
	require.NoError(t, err)
	ctlCloseLater(t, cq)
	var srq *hand.SRQ
	if useSRQ {
		srq, err = r.pd.NewSRQ(hand.SRQConfig{MaxWR: concRecvSlots})
		require.NoError(t, err)
		ctlCloseLater(t, srq)
	}
	recvMR, err := r.pd.Alloc(concRecvSlots*concSlotSize, hand.AccessLocalWrite)
	require.NoError(t, err)
	ctlCloseLater(t, recvMR)
	recvBuf := recvMR.Bytes()

	// Sending QPs a[i] and receiving QPs b[i]: every completion, send or
	// receive, goes to cq.
	a, b := make([]*hand.QP, nqp), make([]*hand.QP, nqp)
	for i := range nqp {
		a[i], err = r.pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: cq,
			Caps: hand.QPCaps{MaxSendWR: concSendDepth, MaxRecvWR: 1, MaxInlineData: concPayload}})
		require.NoError(t, err)
		ctlCloseLater(t, a[i])
		caps := hand.QPCaps{MaxSendWR: 1, MaxRecvWR: concRecvSlots}
		if useSRQ {
			caps.MaxRecvWR = 0
		}
		b[i], err = r.pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: cq, SRQ: srq, Caps: caps})
		require.NoError(t, err)
		ctlCloseLater(t, b[i])
		pa, pb := hand.RandomPSN(), hand.RandomPSN()
		require.NoError(t, a[i].Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: hand.AccessLocalWrite, PSN: pa, Remote: r.endpoint(b[i], pb)}))
		require.NoError(t, b[i].Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: hand.AccessLocalWrite, PSN: pb, Remote: r.endpoint(a[i], pa)}))
	}
	// Receives: all slots posted before the first send, spread over the
	// receiving QPs (or all on the SRQ); a slot's state says whether it is
	// posted, and flips exactly once each way per use.
	slotState := make([]atomic.Int32, concRecvSlots)
	postRecv := func(rc *hand.RecvChain, slots []int) error {
		// A chain per QP: with an SRQ, one.
		for q := range nqp {
			v := 0
			for _, s := range slots {
				if useSRQ || s%nqp == q {
					v++
				}
			}
			if v == 0 {
				continue
			}
			w := rc.Reserve(v)
			k := 0
			for _, s := range slots {
				if useSRQ || s%nqp == q {
					if !slotState[s].CompareAndSwap(0, 1) {
						return fmt.Errorf("receive slot %d posted while posted", s)
					}
					w.Set(k, uint64(s), recvMR.SGE(s*concSlotSize, concSlotSize))
					k++
				}
			}
			var err error
			if useSRQ {
				err = rc.PostSRQRecv(srq)
			} else {
				err = rc.PostRecv(b[q])
			}
			if err != nil {
				return err
			}
			if useSRQ {
				break
			}
		}
		return nil
	}
	{
		rc, err := hand.NewRecvChain(concRecvSlots, 1)
		require.NoError(t, err)
		all := make([]int, concRecvSlots)
		for s := range all {
			all[s] = s
		}
		require.NoError(t, postRecv(rc, all))
		require.NoError(t, rc.Close())
	}

	timeout := 10 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var firstErr atomic.Pointer[error]
	fail := func(err error) {
		firstErr.CompareAndSwap(nil, &err)
		cancel()
	}
	cr := make([]*credits, nqp)
	for i := range cr {
		cr[i] = newCredits(concSendDepth)
	}
	go func() { // wake senders waiting for credits when the test stops
		<-ctx.Done()
		for _, c := range cr {
			c.halt()
		}
	}()
	sendSeen := make([]atomic.Uint32, n) // by sender*per+index
	recvSeen := make([]atomic.Uint32, n)
	var sendsDone, recvsDone atomic.Int64
	freed := make(chan int, concRecvSlots) // slots polled, to post again
	start := time.Now()

	var senders, others sync.WaitGroup
	for g := range concSenders {
		senders.Add(1)
		go func() {
			defer senders.Done()
			qp, c := a[g%nqp], cr[g%nqp]
			sc, err := hand.NewSendChain(concMaxChain, 1, concPayload)
			if err != nil {
				fail(err)
				return
			}
			defer sc.Close()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			var msg [concPayload]byte
			for i := 0; i < per; {
				k := min(1+rng.IntN(concMaxChain), per-i)
				if !c.take(k) {
					return
				}
				w := sc.Reserve(k)
				for j := range k {
					idx := uint32(i + j)
					binary.LittleEndian.PutUint32(msg[0:], uint32(g))
					binary.LittleEndian.PutUint32(msg[4:], idx)
					binary.LittleEndian.PutUint64(msg[8:], concCheck(uint32(g), idx))
					w.SetInline(j, uint64(g)<<32|uint64(idx), hand.Signaled, msg[:])
				}
				if err := sc.PostSend(qp); err != nil {
					fail(fmt.Errorf("sender %d, messages %d-%d: %w", g, i, i+k-1, err))
					return
				}
				i += k
			}
		}()
	}
	for p := range concRecvPosters {
		others.Add(1)
		go func() {
			defer others.Done()
			rc, err := hand.NewRecvChain(concMaxChain*nqp, 1)
			if err != nil {
				fail(err)
				return
			}
			defer rc.Close()
			batch := make([]int, 0, concMaxChain)
			for {
				batch = batch[:0]
				select {
				case s := <-freed:
					batch = append(batch, s)
				case <-ctx.Done():
					return
				}
			drain:
				for len(batch) < cap(batch) {
					select {
					case s := <-freed:
						batch = append(batch, s)
					default:
						break drain
					}
				}
				if err := postRecv(rc, batch); err != nil {
					fail(fmt.Errorf("receive poster %d: %w", p, err))
					return
				}
			}
		}()
	}
	var pollersLeft atomic.Int32
	pollersLeft.Store(concPollers)
	for p := range concPollers {
		others.Add(1)
		go func() {
			defer others.Done()
			defer func() {
				if pollersLeft.Add(-1) == 0 {
					cancel() // the receive posters and the credit watcher
				}
			}()
			pl, err := hand.NewPoller(cq, 64)
			if err != nil {
				fail(err)
				return
			}
			defer pl.Close()
			// What this poller saw last of each sender: what one poller
			// reaps is in the CQ's order, so each sender's indexes rise.
			var lastSend, lastRecv [concSenders]int64
			for i := range concSenders {
				lastSend[i], lastRecv[i] = -1, -1
			}
			give := make([]int, nqp)
			idle := 0
			for sendsDone.Load() < int64(n) || recvsDone.Load() < int64(n) {
				if ctx.Err() != nil {
					return
				}
				wcs, err := pl.Poll()
				if err != nil {
					fail(fmt.Errorf("poller %d: %w", p, err))
					return
				}
				if len(wcs) == 0 {
					if idle++; idle < 64 {
						runtime.Gosched()
					} else {
						time.Sleep(20 * time.Microsecond)
					}
					continue
				}
				idle = 0
				for i := range wcs {
					w := &wcs[i]
					if !w.OK() {
						fail(fmt.Errorf("poller %d: wr_id %#x: %s (vendor error %#x)", p, w.WRID(), w.StatusString(), w.VendorErr()))
						return
					}
					if !w.IsRecv() {
						g, idx := int(w.WRID()>>32), int64(uint32(w.WRID()))
						if g >= concSenders || idx >= int64(per) {
							fail(fmt.Errorf("poller %d: send completion of unknown wr_id %#x", p, w.WRID()))
							return
						}
						if !sendSeen[g*per+int(idx)].CompareAndSwap(0, 1) {
							fail(fmt.Errorf("poller %d: send %d of sender %d completed twice", p, idx, g))
							return
						}
						if idx <= lastSend[g] {
							fail(fmt.Errorf("poller %d: send %d of sender %d completed after its send %d", p, idx, g, lastSend[g]))
							return
						}
						lastSend[g] = idx
						give[g%nqp]++
						sendsDone.Add(1)
						continue
					}
					s := int(w.WRID())
					if s >= concRecvSlots || !slotState[s].CompareAndSwap(1, 0) {
						fail(fmt.Errorf("poller %d: receive completion of wr_id %#x, not a posted slot", p, w.WRID()))
						return
					}
					m := recvBuf[s*concSlotSize : s*concSlotSize+concPayload]
					g := binary.LittleEndian.Uint32(m[0:])
					idx := binary.LittleEndian.Uint32(m[4:])
					if w.ByteLen() != concPayload || g >= concSenders || int(idx) >= per ||
						binary.LittleEndian.Uint64(m[8:]) != concCheck(g, idx) {
						fail(fmt.Errorf("poller %d: slot %d: %d bytes %x", p, s, w.ByteLen(), m))
						return
					}
					// The message came to the QP its sender posts to.
					if want := b[int(g)%nqp].Num(); w.QPNum() != want {
						fail(fmt.Errorf("poller %d: message %d of sender %d arrived on QP %d, want %d", p, idx, g, w.QPNum(), want))
						return
					}
					if !recvSeen[int(g)*per+int(idx)].CompareAndSwap(0, 1) {
						fail(fmt.Errorf("poller %d: message %d of sender %d arrived twice", p, idx, g))
						return
					}
					if int64(idx) <= lastRecv[g] {
						fail(fmt.Errorf("poller %d: message %d of sender %d arrived after its message %d", p, idx, g, lastRecv[g]))
						return
					}
					lastRecv[g] = int64(idx)
					recvsDone.Add(1)
					freed <- s // never blocks: it holds every slot
				}
				for q, k := range give {
					if k > 0 {
						cr[q].give(k)
						give[q] = 0
					}
				}
			}
		}()
	}
	senders.Wait()
	others.Wait()
	elapsed := time.Since(start)
	if e := firstErr.Load(); e != nil {
		t.Fatalf("after %d sends and %d receives completed of %d, %v: %v", sendsDone.Load(), recvsDone.Load(), n, elapsed, *e)
	}
	if ctx.Err() == context.DeadlineExceeded && (sendsDone.Load() < int64(n) || recvsDone.Load() < int64(n)) {
		t.Fatalf("after %v, %d sends and %d receives completed of %d", timeout, sendsDone.Load(), recvsDone.Load(), n)
	}
	// Every message and send exactly once: none twice (checked as they
	// came), so the counts say none is missing; the flags say the same.
	require.EqualValues(t, n, sendsDone.Load())
	require.EqualValues(t, n, recvsDone.Load())
	for i := range n {
		if sendSeen[i].Load() != 1 || recvSeen[i].Load() != 1 {
			t.Fatalf("message %d of sender %d: send completed %d times, arrived %d times", i%per, i/per, sendSeen[i].Load(), recvSeen[i].Load())
		}
	}
	recv := "a receive queue each"
	if useSRQ {
		recv = "one SRQ"
	}
	t.Logf("%d messages of %d bytes on %d RC QP(s), %s: %d senders (chains of 1-%d), %d receive posters, %d pollers on one CQ; %v, %.0f messages/s; race build %v",
		n, concPayload, nqp, recv, concSenders, concMaxChain, concRecvPosters, concPollers, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), raceBuild)
}
