package rxe

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// An RC pair connected in one call per side over a (simulated) side
// channel moves data byte for byte, both ways.
func TestControlRCConnect(t *testing.T) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.RC)
	for _, q := range []*hand.QP{a, b} {
		s, err := q.State()
		require.NoError(t, err)
		require.Equal(t, verbs.QPSRts, s)
	}
	ctlExchangeData(t, r, a, b)
	ctlExchangeData(t, r, b, a)
}

func TestControlUCConnect(t *testing.T) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.UC)
	ctlExchangeData(t, r, a, b)
}

// ctlExchangeData sends 1000 bytes from the first half of the rig's MR
// through from to the second half through to, and checks them.
func ctlExchangeData(t *testing.T, r *ctlRig, from, to *hand.QP) {
	t.Helper()
	buf := r.mr.Bytes()
	for i := range 1000 {
		buf[i] = byte(i*7 + int(from.Num()))
	}
	clear(buf[32768 : 32768+1000])
	ctlPostRecv(t, to, r.mr, 100, 1, 32768, 4096)
	ctlPostSend(t, from, r.mr, 200, 0, 1000)
	wcs := ctlReap(t, r.cq, 2)
	byID := map[uint64]verbs.WC{}
	for _, wc := range wcs {
		require.Equal(t, verbs.WCSuccess, wc.Status, "wr %d", wc.WRID)
		byID[wc.WRID] = wc
	}
	require.Equal(t, verbs.WCRecv, byID[100].Opcode)
	require.Equal(t, uint32(1000), byID[100].ByteLen)
	require.Equal(t, to.Num(), byID[100].QPNum)
	require.Equal(t, verbs.WCSend, byID[200].Opcode)
	require.True(t, bytes.Equal(buf[:1000], buf[32768:32768+1000]), "received bytes differ from sent")
}

func TestControlQPQuery(t *testing.T) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.RC)
	attr, init, err := a.Query()
	require.NoError(t, err)
	require.Equal(t, verbs.QPSRts, attr.QPState)
	require.Equal(t, b.Num(), attr.DestQPNum)
	require.Equal(t, uint8(1), attr.AHAttr.IsGlobal, "RoCE uses a GRH")
	require.Equal(t, uint8(r.gidIndex), attr.AHAttr.GRH.SGIDIndex)
	require.Equal(t, r.gid.Raw(), attr.AHAttr.GRH.DGID)
	pa, err := r.ctx.QueryPort(1)
	require.NoError(t, err)
	require.Equal(t, pa.ActiveMTU, attr.PathMTU, "MTU 0 means the port's active MTU")
	require.Equal(t, uint8(14), attr.Timeout)
	require.Equal(t, uint8(6), attr.RetryCnt, "0 means 6: rxe retries forever at 7")
	require.Equal(t, r.cq.Raw(), init.SendCQ)
	require.GreaterOrEqual(t, a.Caps().MaxSendWR, 64)
	require.GreaterOrEqual(t, a.Caps().MaxRecvWR, 1024)
	require.Equal(t, hand.RC, a.Type())
}

// Transitions refuse what would fail (or silently misroute) with an error
// that names the attribute; what the kernel refuses comes back as the verb,
// the step and the errno.
func TestControlQPTransitionErrors(t *testing.T) {
	r := newCtlRig(t)
	q := r.qp(t, hand.RC)
	peer := r.qp(t, hand.RC)
	var ae *hand.AttrError

	err := q.ToRTR(hand.RTRAttr{DestQPN: peer.Num()})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "state", ae.Field)
	require.ErrorContains(t, err, "RESET, not INIT")

	require.NoError(t, q.ToInit(hand.InitAttr{Access: hand.AccessLocalWrite}))
	err = q.ToInit(hand.InitAttr{})
	require.ErrorAs(t, err, &ae)

	// RoCE routes by GID: a LID-only path is refused.
	err = q.ToRTR(hand.RTRAttr{Path: hand.Path{DLID: 1}, DestQPN: peer.Num()})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "Path.DGID", ae.Field)
	require.ErrorIs(t, err, syscall.EINVAL)
	t.Log(err)

	gidPath := hand.Path{DGID: r.gid, SGIDIndex: r.gidIndex}
	for _, c := range []struct {
		field string
		attr  hand.RTRAttr
	}{
		{"DestQPN", hand.RTRAttr{Path: gidPath}},
		{"RQPSN", hand.RTRAttr{Path: gidPath, DestQPN: peer.Num(), RQPSN: 1 << 24}},
		{"MTU", hand.RTRAttr{Path: gidPath, DestQPN: peer.Num(), MTU: verbs.MTU4096 + 1}},
		{"Path.SGIDIndex", hand.RTRAttr{Path: hand.Path{DGID: r.gid, SGIDIndex: 10000}, DestQPN: peer.Num()}},
		{"Path.Port", hand.RTRAttr{Path: hand.Path{Port: 2, DGID: r.gid}, DestQPN: peer.Num()}},
	} {
		err := q.ToRTR(c.attr)
		require.ErrorAs(t, err, &ae, c.field)
		require.Equal(t, c.field, ae.Field)
	}

	// Past the validation, the kernel: INIT -> RTR with only the state
	// attribute is missing the required ones.
	err = q.Modify(&verbs.QPAttr{QPState: verbs.QPSRtr}, verbs.QPAttrState)
	require.ErrorIs(t, err, syscall.EINVAL)
	require.EqualError(t, err, "QP to RTR: ibv_modify_qp: invalid argument (EINVAL)")
	var ve *hand.VerbError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "ibv_modify_qp", ve.Func())
	require.Equal(t, syscall.EINVAL, ve.Errno())
	// The step wraps the stub's own error: the same value the stub gives
	// a direct call failing with the same errno, not a copy.
	direct := verbs.ModifyQP(q.Raw(), &verbs.QPAttr{QPState: verbs.QPSRtr}, verbs.QPAttrState)
	require.Same(t, direct, ve)

	// The QP is still in INIT, and a valid RTR goes through.
	require.NoError(t, q.ToRTR(hand.RTRAttr{Path: gidPath, DestQPN: peer.Num()}))
	err = q.ToRTS(hand.RTSAttr{RetryCount: 8})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "RetryCount", ae.Field)
	require.NoError(t, q.ToRTS(hand.RTSAttr{RetryCount: hand.NoRetry}))
	attr, _, err := q.Query()
	require.NoError(t, err)
	require.Equal(t, uint8(0), attr.RetryCnt)

	ud := r.qp(t, hand.UD)
	require.ErrorAs(t, ud.Connect(hand.ConnectAttr{}), &ae)
	require.ErrorAs(t, q.ReadyUD(1, 0, 0), &ae)
}

// Moving a QP with posted receives to ERR flushes every one of them exactly
// once; RESET then makes the QP reusable.
func TestControlQPErrorAndReset(t *testing.T) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.RC)
	const n = 500
	ctlPostRecv(t, a, r.mr, 0, n, 0, 64)
	require.NoError(t, a.ToError())
	s, err := a.State()
	require.NoError(t, err)
	require.Equal(t, verbs.QPSErr, s)
	seen := make([]int, n)
	for _, wc := range ctlReap(t, r.cq, n) {
		require.Equal(t, verbs.WCWRFlushErr, wc.Status)
		require.Less(t, wc.WRID, uint64(n))
		seen[wc.WRID]++
	}
	for id, c := range seen {
		require.Equal(t, 1, c, "wr %d flushed %d times", id, c)
	}
	k, err := r.cq.Poll(make([]verbs.WC, 4))
	require.NoError(t, err)
	require.Zero(t, k, "nothing after the flush")

	require.NoError(t, a.ToReset())
	s, err = a.State()
	require.NoError(t, err)
	require.Equal(t, verbs.QPSReset, s)

	// Reconnect both sides from scratch and talk again.
	require.NoError(t, b.ToReset())
	pa, pb := hand.RandomPSN(), hand.RandomPSN()
	require.NoError(t, a.Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: hand.AccessLocalWrite, PSN: pa, Remote: r.endpoint(b, pb)}))
	require.NoError(t, b.Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: hand.AccessLocalWrite, PSN: pb, Remote: r.endpoint(a, pa)}))
	ctlExchangeData(t, r, a, b)
}

// udPair makes two UD QPs in RTS with qkey, and an AH to the rig's GID.
func (r *ctlRig) udPair(t *testing.T, qkey uint32) (a, b *hand.QP, ah *hand.AH) {
	t.Helper()
	return r.udPairOn(t, qkey, r.cq)
}

// udPairOn is udPair with both QPs completing on cq.
func (r *ctlRig) udPairOn(t *testing.T, qkey uint32, cq *hand.CQ) (a, b *hand.QP, ah *hand.AH) {
	t.Helper()
	a, b = r.qpOn(t, hand.UD, cq), r.qpOn(t, hand.UD, cq)
	require.NoError(t, a.ReadyUD(1, qkey, hand.RandomPSN()))
	require.NoError(t, b.ReadyUD(1, qkey, hand.RandomPSN()))
	ah, err := r.pd.NewAH(hand.Path{DGID: r.gid, SGIDIndex: r.gidIndex})
	require.NoError(t, err)
	ctlCloseLater(t, ah)
	return a, b, ah
}

// UD: an address handle from the peer's GID; the payload lands GRHSize
// bytes into the receive buffer.
func TestControlUD(t *testing.T) {
	r := newCtlRig(t)
	const qkey = 0x11111111
	a, b, ah := r.udPair(t, qkey)

	buf := r.mr.Bytes()
	copy(buf, "datagram payload")
	ctlPostRecv(t, b, r.mr, 1, 1, 4096, 1024+hand.GRHSize)
	c, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	c.Reserve(1).SetUD(0, 2, hand.Signaled, r.mr.SGE(0, 16), ah, b.Num(), qkey)
	require.NoError(t, c.PostSend(a))
	for _, wc := range ctlReap(t, r.cq, 2) {
		require.Equal(t, verbs.WCSuccess, wc.Status)
		if wc.WRID == 1 {
			require.Equal(t, uint32(16+hand.GRHSize), wc.ByteLen)
			require.Equal(t, a.Num(), wc.SrcQP)
		}
	}
	require.Equal(t, "datagram payload", string(buf[4096+hand.GRHSize:4096+hand.GRHSize+16]))

	_, err = r.pd.NewAH(hand.Path{})
	var ae *hand.AttrError
	require.ErrorAs(t, err, &ae, "RoCE AH without a GID")
}

// Closing a CQ or PD that a QP uses names the QP; after Close the QP's
// methods return ErrClosed.
func TestControlQPLifetime(t *testing.T) {
	r := newCtlRig(t)
	q, err := r.pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: r.cq, Caps: hand.QPCaps{MaxSendWR: 4, MaxRecvWR: 4}})
	require.NoError(t, err)
	name := fmt.Sprintf("RC QP %d", q.Num())
	var busy *hand.BusyError
	require.ErrorAs(t, r.cq.Close(), &busy)
	require.Equal(t, []string{name}, busy.Children)
	err = r.pd.Close()
	require.ErrorAs(t, err, &busy)
	require.Contains(t, busy.Children, name)
	require.Contains(t, err.Error(), name)

	require.NoError(t, q.Close())
	require.NoError(t, q.Close())
	require.ErrorIs(t, q.ToError(), hand.ErrClosed)
	require.ErrorIs(t, q.ToInit(hand.InitAttr{}), hand.ErrClosed)
	_, err = q.State()
	require.ErrorIs(t, err, hand.ErrClosed)
	_, _, err = q.Query()
	require.ErrorIs(t, err, hand.ErrClosed)

	_, err = r.pd.NewQP(hand.QPConfig{Type: hand.RC})
	require.ErrorIs(t, err, syscall.EINVAL, "no CQ")
}

// A UD server answers whoever wrote to it, as a UD ping-pong does: the
// sender's IPv4 address from the GRH area (RoCE v2 over IPv4: the IPv4
// header at byte 20, which GRHSource reads; the GRH's own SGID field is
// junk there), and the reply through an AH made from the completion
// (ibv_create_ah_from_wc). Injected: one datagram a -> b. Measured: b sees
// the VM's address as the source, and a receives b's reply, from b's QP.
func TestControlUDReplyFromWC(t *testing.T) {
	r := newCtlRig(t)
	const qkey = 0x22222222
	a, b, ah := r.udPair(t, qkey)
	p, err := hand.NewPoller(r.cq, 4)
	require.NoError(t, err)
	defer p.Close()
	ctx := ctlContext(t, 20*time.Second)
	reap := func(want uint64) hand.WC {
		t.Helper()
		for {
			wcs, err := p.Wait(ctx)
			require.NoError(t, err)
			for _, w := range wcs {
				require.True(t, w.OK(), "wr %d: %s", w.WRID(), w.StatusString())
				if w.WRID() == want {
					return w
				}
			}
		}
	}

	buf := r.mr.Bytes()
	const recvAt, replyAt = 4096, 8192
	ctlPostRecv(t, b, r.mr, 1, 1, recvAt, 1024+hand.GRHSize)
	ctlPostRecv(t, a, r.mr, 3, 1, replyAt, 1024+hand.GRHSize)
	copy(buf, "who is there?")
	sc, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer sc.Close()
	sc.Reserve(1).SetUD(0, 2, hand.Signaled, r.mr.SGE(0, 13), ah, b.Num(), qkey)
	require.NoError(t, sc.PostSend(a))

	w := reap(1)
	grh, payload, err := hand.SplitUD(buf[recvAt:recvAt+1024+hand.GRHSize], &w)
	require.NoError(t, err)
	require.NotNil(t, grh, "a RoCE datagram carries a GRH")
	require.Equal(t, "who is there?", string(payload))
	src, err := hand.GRHSource(grh)
	require.NoError(t, err, "GRH area % x", buf[recvAt:recvAt+hand.GRHSize])
	require.Equal(t, ctlAddr(t), src, "the sender's IPv4 address")
	t.Logf("datagram from %s (QP %d); the GRH's SGID field reads %s", src, w.SrcQP(), hand.GID(*grh.SGID.Raw()))

	reply, err := r.pd.NewAHFromWC(&w, grh, 1)
	require.NoError(t, err)
	ctlCloseLater(t, reply)
	copy(buf[64:], "b here")
	sc.Reserve(1).SetUD(0, 4, hand.Signaled, r.mr.SGE(64, 6), reply, w.SrcQP(), qkey)
	require.NoError(t, sc.PostSend(b))
	back := reap(3)
	_, payload, err = hand.SplitUD(buf[replyAt:replyAt+1024+hand.GRHSize], &back)
	require.NoError(t, err)
	require.Equal(t, "b here", string(payload))
	require.Equal(t, b.Num(), back.SrcQP(), "the reply came from b")
}

// ToInit and ToRTR on two goroutines: ToRTR, retried while the QP is not
// yet in INIT, must see the port ToInit chose as soon as it sees INIT.
// ToInit stored the port after the modify, under a read lock that orders
// nothing between two users: a data race (the race binary of make
// rxe-test runs this test), and a ToRTR that could read port 0.
func TestControlQPConcurrentInitRTR(t *testing.T) {
	r := newCtlRig(t)
	for range 20 {
		q, peer := r.qp(t, hand.RC), r.qp(t, hand.RC)
		require.NoError(t, peer.ToInit(hand.InitAttr{Access: hand.AccessLocalWrite}))
		path := hand.Path{DGID: r.gid, SGIDIndex: r.gidIndex}
		// stop ends the retries when ToInit fails or ToRTR never gets
		// past INIT: the loop would spin for the rest of the binary.
		done, stop := make(chan error, 1), make(chan struct{})
		go func() {
			for {
				err := q.ToRTR(hand.RTRAttr{Path: path, DestQPN: peer.Num()})
				var ae *hand.AttrError
				if errors.As(err, &ae) && ae.Field == "state" {
					select {
					case <-stop:
						done <- err
						return
					default:
						continue // not INIT yet
					}
				}
				done <- err
				return
			}
		}()
		if err := q.ToInit(hand.InitAttr{Access: hand.AccessLocalWrite}); err != nil {
			close(stop)
			t.Fatalf("ToInit: %v", err)
		}
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			close(stop)
			t.Fatal("ToRTR still refused as not in INIT 10 s after ToInit returned")
		}
		s, err := q.State()
		require.NoError(t, err)
		require.Equal(t, verbs.QPSRtr, s)
	}
}

// Two ToInits at once on a QP in RESET: one moves it to INIT, the other
// finds it there and says so, as it would after the first. Both checked
// the state libibverbs keeps in struct ibv_qp under the read lock alone,
// so both could pass the check and both modify (INIT to INIT is a legal
// transition), the later one's port then the QP's.
func TestControlQPConcurrentToInit(t *testing.T) {
	r := newCtlRig(t)
	for run := range 100 {
		q := r.qp(t, hand.RC)
		start, errs := make(chan struct{}), make(chan error, 2)
		for range 2 {
			go func() {
				<-start
				errs <- q.ToInit(hand.InitAttr{Access: hand.AccessLocalWrite})
			}()
		}
		close(start)
		succeeded := 0
		for range 2 {
			err := <-errs
			if err == nil {
				succeeded++
				continue
			}
			var ae *hand.AttrError
			require.ErrorAs(t, err, &ae, "run %d", run)
			require.Equal(t, "state", ae.Field, "run %d: %v", run, err)
		}
		require.Equal(t, 1, succeeded, "run %d: ToInits that moved the QP from RESET", run)
		require.NoError(t, q.Close())
	}
}
