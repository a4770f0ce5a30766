package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// Two receiving QPs share one SRQ; the SRQ's limit raises an async event,
// delivered through the netpoller and naming the SRQ.
func TestControlSRQAndLimitEvent(t *testing.T) {
	r := newCtlRig(t)
	testSRQLimitEvent(t, r, r.ctx)
}

// The same through librdmacm's context of the device: everything is made
// on one CMContext handle, and the event is read through another, as a
// program reads a device's events through hand.CMContext while its Conns
// made their QPs through their own. The event still names the SRQ: the
// handles of one librdmacm context share what was made through them.
// Before, each handle knew only its own objects, and the event came with
// a nil SRQ.
func TestControlSRQLimitEventAcrossCMContexts(t *testing.T) {
	name, gidIndex := RequireDevice(t)
	made, err := hand.CMContext(name)
	require.NoError(t, err)
	ctlCloseLater(t, made)
	read, err := hand.CMContext(name)
	require.NoError(t, err)
	ctlCloseLater(t, read)
	require.NotSame(t, made, read, "two handles")
	require.Equal(t, made.Raw(), read.Raw(), "of one librdmacm context")
	testSRQLimitEvent(t, newCtlRigOn(t, made, gidIndex), read)
}

// testSRQLimitEvent arms an SRQ made on r, drains it below its limit, and
// requires the limit event, read from events, to name the SRQ.
func testSRQLimitEvent(t *testing.T, r *ctlRig, events *hand.Context) {
	srq, err := r.pd.NewSRQ(hand.SRQConfig{MaxWR: 64})
	require.NoError(t, err)
	ctlCloseLater(t, srq)

	var recv, send [2]*hand.QP
	for i := range recv {
		recv[i], err = r.pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: r.cq, SRQ: srq, Caps: hand.QPCaps{MaxSendWR: 4}})
		require.NoError(t, err)
		ctlCloseLater(t, recv[i])
		send[i] = r.qp(t, hand.RC)
		ps, pr := hand.RandomPSN(), hand.RandomPSN()
		require.NoError(t, send[i].Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: hand.AccessLocalWrite, PSN: ps, Remote: r.endpoint(recv[i], pr)}))
		require.NoError(t, recv[i].Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: hand.AccessLocalWrite, PSN: pr, Remote: r.endpoint(send[i], ps)}))
	}
	var busy *hand.BusyError
	require.ErrorAs(t, srq.Close(), &busy)
	require.Len(t, busy.Children, 2, "both QPs named")

	c, err := hand.NewRecvChain(8, 1)
	require.NoError(t, err)
	defer c.Close()
	w := c.Reserve(8)
	for i := range 8 {
		w.Set(i, uint64(100+i), r.mr.SGE(8192+i*256, 256))
	}
	require.NoError(t, c.PostSRQRecv(srq))
	require.NoError(t, srq.Arm(7))
	a, err := srq.Query()
	require.NoError(t, err)
	require.Equal(t, uint32(7), a.SRQLimit)
	require.GreaterOrEqual(t, a.MaxWR, uint32(64))

	evc := events.Events(ctlContext(t, 20*time.Second))
	for i := range send {
		copy(r.mr.Bytes()[i*64:], []byte{byte('A' + i)})
		ctlPostSend(t, send[i], r.mr, uint64(i), i*64, 1)
	}
	got := map[uint32]byte{}
	for _, wc := range ctlReap(t, r.cq, 4) {
		require.Equal(t, verbs.WCSuccess, wc.Status)
		if wc.Opcode == verbs.WCRecv {
			got[wc.QPNum] = r.mr.Bytes()[8192+int(wc.WRID-100)*256]
		}
	}
	require.Equal(t, map[uint32]byte{recv[0].Num(): 'A', recv[1].Num(): 'B'}, got, "each receiving QP took one SRQ buffer")

	select {
	case ev := <-evc:
		t.Log(ev)
		require.Equal(t, verbs.EventSRQLimitReached, ev.Type)
		require.Same(t, srq, ev.SRQ)
		require.Contains(t, ev.String(), "SRQ limit reached")
	case <-time.After(10 * time.Second):
		t.Fatal("no SRQ limit event 10 s after the SRQ fell below its limit")
	}
	a, err = srq.Query()
	require.NoError(t, err)
	require.Zero(t, a.SRQLimit, "the event disarms the SRQ")
}

// NextEvent honours its context and Close.
func TestControlAsyncEventsCancelAndClose(t *testing.T) {
	name, _ := RequireDevice(t)
	ctx, err := hand.Open(name)
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = ctx.NextEvent(cctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	errc := make(chan error, 1)
	go func() { _, err := ctx.NextEvent(context.Background()); errc <- err }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, ctx.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, hand.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Context.Close did not wake NextEvent")
	}
	events := ctx.Events(context.Background())
	_, open := <-events
	require.False(t, open, "Events of a closed Context is closed")
}
