package rxe

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// A CQ smaller than the work posted to it overruns, and the program is
// told. Injected: one CQ of 4 entries (rxe makes 7) for the sends and
// receives of an RC pair, 32 receives and 32 signaled sends, 64
// completions. rxe drops each completion it has no room for and raises
// IBV_EVENT_CQ_ERR naming the CQ; a receive it could not complete moves
// the receiving QP to the error state. Measured: the event arrives and
// names the CQ (the same *hand.CQ), CQ.Overrun turns true, the poller
// returns the completions the CQ kept and then ErrCQOverrun on every
// empty poll, never an empty CQ that hides the loss, and the receiving QP
// is in the error state.
func TestControlCQOverrun(t *testing.T) {
	r := newCtlRig(t)
	const depth, n = 4, 32
	cq, err := r.ctx.NewCQ(depth, hand.CQOptions{})
	require.NoError(t, err)
	ctlCloseLater(t, cq)
	require.GreaterOrEqual(t, cq.Size(), depth)
	require.Less(t, cq.Size(), 2*n, "the CQ must be too small for the work")
	qp := func() *hand.QP {
		q, err := r.pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: cq, Caps: hand.QPCaps{MaxSendWR: n, MaxRecvWR: n}})
		require.NoError(t, err)
		ctlCloseLater(t, q)
		return q
	}
	a, b := qp(), qp()
	pa, pb := hand.RandomPSN(), hand.RandomPSN()
	access := hand.AccessLocalWrite | hand.AccessRemoteWrite
	require.NoError(t, a.Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: access, PSN: pa, Remote: r.endpoint(b, pb)}))
	require.NoError(t, b.Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: access, PSN: pb, Remote: r.endpoint(a, pa)}))
	poller, err := hand.NewPoller(cq, 16)
	require.NoError(t, err)
	ctlCloseLater(t, poller)

	events := r.ctx.Events(ctlContext(t, 30*time.Second))
	ctlPostRecv(t, b, r.mr, 1000, n, 8192, 64)
	sends, err := hand.NewSendChain(n, 1, 0)
	require.NoError(t, err)
	defer sends.Close()
	v := sends.Reserve(n)
	for i := range n {
		v.SetSend(i, uint64(i), hand.Signaled, r.mr.SGE(i*64, 64))
	}
	start := time.Now()
	require.NoError(t, sends.PostSend(a))

	var first hand.AsyncEvent
	select {
	case first = <-events:
	case <-time.After(10 * time.Second):
		t.Fatalf("no async event 10 s after posting %d completions' work to a CQ of %d", 2*n, cq.Size())
	}
	after := time.Since(start)
	t.Log(first)
	require.Equal(t, verbs.EventCQErr, first.Type)
	require.Same(t, cq, first.CQ, "the event names the CQ that overran")
	require.True(t, cq.Overrun())
	require.Contains(t, first.String(), "CQ error on CQ ")

	// The program polls on: it gets what the CQ kept, then the overrun.
	var got, failed int
	deadline := time.Now().Add(10 * time.Second)
	for {
		wcs, err := poller.Poll()
		if err != nil {
			require.ErrorIs(t, err, hand.ErrCQOverrun)
			var oe *hand.OverrunError
			require.True(t, errors.As(err, &oe))
			require.Equal(t, cq.Size(), oe.Size)
			t.Log(err)
			break
		}
		require.NotEmpty(t, wcs, "an empty poll of a CQ that overran must say so")
		for i := range wcs {
			got++
			if !wcs[i].OK() {
				failed++
			}
		}
		require.True(t, time.Now().Before(deadline), "still polling after 10 s")
	}
	require.Less(t, got, 2*n, "completions were lost, and the poll said so")
	_, err = poller.Poll()
	require.ErrorIs(t, err, hand.ErrCQOverrun, "and says so again")

	// rxe moves the QP whose receive found the CQ full to the error state.
	var state hand.QPState
	for state != verbs.QPSErr && time.Now().Before(deadline) {
		state, err = b.State()
		require.NoError(t, err)
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, verbs.QPSErr, state, "the receiving QP")
	sa, err := a.State()
	require.NoError(t, err)

	more := 0
	for {
		select {
		case ev := <-events:
			require.Equal(t, verbs.EventCQErr, ev.Type, "%v", ev)
			require.Same(t, cq, ev.CQ)
			more++
			continue
		case <-time.After(100 * time.Millisecond):
		}
		break
	}
	t.Logf("CQ of %d entries (asked %d), %d WRs posted (%d sends, %d receives, all signaled): "+
		"first IBV_EVENT_CQ_ERR read %v after the post, %d more within 100 ms; polled %d completions "+
		"(%d failed), then ErrCQOverrun; receiving QP %v, sending QP %v",
		cq.Size(), depth, 2*n, n, n, after.Round(time.Microsecond), more, got, failed, qpStateName(state), qpStateName(sa))
}

// qpStateName is the IBV_QPS_ name of s, for the figures.
func qpStateName(s hand.QPState) string {
	names := map[hand.QPState]string{verbs.QPSReset: "RESET", verbs.QPSInit: "INIT", verbs.QPSRtr: "RTR",
		verbs.QPSRts: "RTS", verbs.QPSSqd: "SQD", verbs.QPSSqe: "SQE", verbs.QPSErr: "ERR"}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprint(uint32(s))
}
