package rxe

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// A poster and a poller on different goroutines (and a third asking the
// control path questions meanwhile): every message arrives, in order, with
// its bytes. Run it under the race detector too (go test -race -c, then the
// binary in the VM with -test.run Concurrent).
func TestControlConcurrentPollerAndPoster(t *testing.T) {
	r := newCtlRig(t)
	recvCQ, err := r.ctx.NewCQ(512, hand.CQOptions{Channel: r.ch})
	require.NoError(t, err)
	ctlCloseLater(t, recvCQ)
	a := r.qp(t, hand.RC)
	b, err := r.pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: r.cq, RecvCQ: recvCQ, Caps: hand.QPCaps{MaxSendWR: 4, MaxRecvWR: 256}})
	require.NoError(t, err)
	ctlCloseLater(t, b)
	pa, pb := hand.RandomPSN(), hand.RandomPSN()
	require.NoError(t, a.Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: hand.AccessLocalWrite, PSN: pa, Remote: r.endpoint(b, pb)}))
	require.NoError(t, b.Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: hand.AccessLocalWrite, PSN: pb, Remote: r.endpoint(a, pa)}))

	const n, slots, size = 1000, 128, 64
	buf := r.mr.Bytes()
	recvBase := 32768 // receive slots; sends come from [0, slots*size)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc, err := hand.NewRecvChain(slots, 1)
	require.NoError(t, err)
	defer rc.Close()
	w := rc.Reserve(slots)
	for i := range slots {
		w.Set(i, uint64(i), r.mr.SGE(recvBase+i*size, size))
	}
	require.NoError(t, rc.PostRecv(b))

	var wg sync.WaitGroup
	var received atomic.Int64
	errs := make(chan error, 3)
	fail := func(err error) {
		errs <- err
		cancel() // stop the others
	}
	wg.Add(3)
	go func() { // poller: waits on the channel, reaps, checks, reposts
		defer wg.Done()
		wc := make([]verbs.WC, 32)
		next := 0
		for next < n {
			if err := recvCQ.RequestNotify(false); err != nil {
				fail(err)
				return
			}
			k, err := recvCQ.Poll(wc)
			if err != nil {
				fail(err)
				return
			}
			if k == 0 {
				if err := recvCQ.Wait(ctx); err != nil {
					fail(err)
					return
				}
				continue
			}
			for _, w := range wc[:k] {
				slot := int(w.WRID % slots)
				got := buf[recvBase+slot*size]
				if w.Status != verbs.WCSuccess || w.ByteLen != size || got != byte(next) {
					fail(&ctlMismatch{next, w, got})
					return
				}
				next++
				received.Store(int64(next))
				rc.Reserve(1).Set(0, w.WRID+slots, r.mr.SGE(recvBase+slot*size, size))
			}
			if err := rc.PostRecv(b); err != nil {
				fail(err)
				return
			}
		}
	}()
	go func() { // poster: one send at a time, each message numbered
		defer wg.Done()
		sc, err := hand.NewSendChain(1, 1, 0)
		if err != nil {
			fail(err)
			return
		}
		defer sc.Close()
		wc := make([]verbs.WC, 1)
		for i := range n {
			slot := i % slots
			for j := range size {
				buf[slot*size+j] = byte(i)
			}
			sc.Reserve(1).SetSend(0, uint64(i), hand.Signaled, r.mr.SGE(slot*size, size))
			if err := sc.PostSend(a); err != nil {
				fail(err)
				return
			}
			for {
				k, err := r.cq.Poll(wc)
				if err != nil {
					fail(err)
					return
				}
				if k == 1 {
					if wc[0].Status != verbs.WCSuccess {
						fail(&ctlMismatch{i, wc[0], 0})
						return
					}
					break
				}
				if ctx.Err() != nil {
					return
				}
			}
		}
	}()
	go func() { // the control path, concurrently
		defer wg.Done()
		for received.Load() < n && ctx.Err() == nil {
			if _, err := b.State(); err != nil {
				fail(err)
				return
			}
			if _, err := r.ctx.QueryPort(1); err != nil {
				fail(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, n, received.Load())
}

type ctlMismatch struct {
	i   int
	wc  verbs.WC
	got byte
}

func (m *ctlMismatch) Error() string {
	return fmt.Sprintf("message %d: status %d, byte_len %d, first byte %d", m.i, m.wc.Status, m.wc.ByteLen, m.got)
}
