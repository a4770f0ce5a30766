package rxe

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// Tests of the rdma_create_ep path (hand.DialEP, hand.ListenEP): server and
// client in one process on the VM's address.

func cmepListen(t *testing.T, cfg hand.ConnConfig) *hand.EPListener {
	t.Helper()
	RequireDevice(t)
	l, err := hand.ListenEP(ctlContext(t, 10*time.Second), netip.AddrPortFrom(ctlAddr(t), 0).String(), cfg)
	require.NoError(t, err)
	require.NotZero(t, l.Addr().Port(), "port 0 picks one")
	ctlCloseLater(t, l)
	return l
}

// cmepServe accepts one connection and hands it back (nil on error).
func cmepServe(t *testing.T, l *hand.EPListener) <-chan *hand.Conn {
	t.Helper()
	out := make(chan *hand.Conn, 1)
	go func() {
		defer close(out)
		c, err := l.Accept(ctlContext(t, 20*time.Second))
		if err != nil {
			t.Errorf("EPListener.Accept: %v", err)
			return
		}
		out <- c
	}()
	return out
}

// ListenEP, Accept and DialEP with private data both ways; a send each way
// over the fast paths; the listener refuses to close under an accepted
// Conn; Disconnect; use after Close.
func TestControlCMEPConnect(t *testing.T) {
	l := cmepListen(t, hand.ConnConfig{PrivateData: []byte("welcome-ep")})
	srvc := cmepServe(t, l)
	ctx := ctlContext(t, 20*time.Second)
	cli, err := hand.DialEP(ctx, l.Addr().String(), hand.ConnConfig{PrivateData: []byte("hello-ep")})
	require.NoError(t, err)
	srv := <-srvc
	require.NotNil(t, srv)

	require.True(t, bytes.HasPrefix(srv.PeerPrivateData(), []byte("hello-ep")), "request data %q", srv.PeerPrivateData())
	require.True(t, bytes.HasPrefix(cli.PeerPrivateData(), []byte("welcome-ep")), "accept data %q", cli.PeerPrivateData())
	require.Equal(t, l.Addr(), cli.RemoteAddr())
	require.Equal(t, cli.LocalAddr(), srv.RemoteAddr())
	require.Same(t, l.PD(), srv.PD(), "rdma_get_request makes the QP on the listener's PD")
	require.Same(t, l.SendCQ(), srv.SendCQ())
	t.Logf("client %s -> server %s on %s, QPs %d and %d", cli.LocalAddr(), srv.LocalAddr(), cli.Context().Name(), cli.QP().Num(), srv.QP().Num())
	for _, c := range []*hand.Conn{cli, srv} {
		s, err := c.QP().State()
		require.NoError(t, err)
		require.Equal(t, verbs.QPSRts, s)
		require.Equal(t, c.QP().Raw(), c.Raw().QP)
		require.GreaterOrEqual(t, c.QP().Caps().MaxSendWR, 16)
	}

	smr, err := srv.PD().Alloc(4096, hand.AccessLocalWrite)
	require.NoError(t, err)
	cmr, err := cli.PD().Alloc(4096, hand.AccessLocalWrite)
	require.NoError(t, err)
	ctlPostRecv(t, srv.QP(), smr, 1, 1, 0, 2048)
	// The client's receive and the server's send go through the rdma_cm
	// fast paths (rdma_post_recvv, rdma_post_sendv) on the ids.
	rc, err := hand.NewRecvChain(1, 1)
	require.NoError(t, err)
	defer rc.Free()
	rc.Reserve(1).Set(0, 10, cmr.SGE(2048, 2048))
	require.NoError(t, rc.PostRecvv(cli))

	copy(cmr.Bytes(), "ping over rdma_create_ep")
	ctlPostSend(t, cli.QP(), cmr, 2, 0, 24)
	wc := ctlReap(t, cli.SendCQ(), 1)[0]
	require.Equal(t, verbs.WCSuccess, wc.Status)
	require.Equal(t, uint64(2), wc.WRID)
	wc = ctlReap(t, srv.RecvCQ(), 1)[0]
	require.Equal(t, verbs.WCSuccess, wc.Status)
	require.Equal(t, uint64(1), wc.WRID)
	require.Equal(t, "ping over rdma_create_ep", string(smr.Bytes()[:wc.ByteLen]))

	copy(smr.Bytes()[2048:], "pong")
	sc, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer sc.Free()
	sc.Reserve(1).SetSend(0, 20, hand.Signaled, smr.SGE(2048, 4))
	require.NoError(t, sc.PostSendv(srv))
	wc = ctlReap(t, srv.SendCQ(), 1)[0]
	require.Equal(t, verbs.WCSuccess, wc.Status)
	require.Equal(t, uint64(20), wc.WRID)
	wc = ctlReap(t, cli.RecvCQ(), 1)[0]
	require.Equal(t, verbs.WCSuccess, wc.Status)
	require.Equal(t, uint64(10), wc.WRID)
	require.Equal(t, "pong", string(cmr.Bytes()[2048:2048+wc.ByteLen]))

	// The accepted Conn's QP and the MR are on the listener's own PD.
	var busy *hand.BusyError
	err = l.Close()
	require.ErrorAs(t, err, &busy)
	require.ErrorIs(t, err, syscall.EBUSY)
	require.Len(t, busy.Children, 2, "%v", err)
	t.Log(err)

	waited := make(chan error, 1)
	go func() { waited <- srv.WaitDisconnect(ctlContext(t, 20*time.Second)) }()
	require.NoError(t, cli.Disconnect(ctx))
	require.NoError(t, <-waited)

	require.NoError(t, smr.Close())
	require.NoError(t, cmr.Close())
	require.NoError(t, srv.Close())
	require.NoError(t, cli.Close())
	require.NoError(t, cli.Close(), "second Close")
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "second Close")

	require.ErrorIs(t, cli.Disconnect(ctx), hand.ErrClosed)
	require.ErrorIs(t, srv.WaitDisconnect(ctx), hand.ErrClosed)
	_, err = cli.QP().State()
	require.ErrorIs(t, err, hand.ErrClosed)
	_, err = l.Accept(ctx)
	require.ErrorIs(t, err, hand.ErrClosed)
	_, err = l.PD().Alloc(4096, hand.AccessLocalWrite)
	require.ErrorIs(t, err, hand.ErrClosed, "the listener's own PD closed with it")
}

// PD and CQ from librdmacm's context serve the listener and the client;
// the listener keeps them from closing; a PD of another context is refused.
func TestControlCMEPSharedResources(t *testing.T) {
	name, _ := RequireDevice(t)
	cmctx, err := hand.CMContext(name)
	require.NoError(t, err)
	ctlCloseLater(t, cmctx)
	pd, err := cmctx.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, pd)
	cq, err := cmctx.NewCQ(64, hand.CQOptions{})
	require.NoError(t, err)
	ctlCloseLater(t, cq)
	mr, err := pd.Alloc(8192, hand.AccessLocalWrite|hand.AccessRemoteRead|hand.AccessRemoteWrite)
	require.NoError(t, err)
	ctlCloseLater(t, mr)

	cfg := hand.ConnConfig{PD: pd, SendCQ: cq}
	l := cmepListen(t, cfg)
	var busy *hand.BusyError
	require.ErrorAs(t, pd.Close(), &busy)
	require.Contains(t, busy.Error(), "EPListener")

	srvc := cmepServe(t, l)
	ctx := ctlContext(t, 20*time.Second)
	cli, err := hand.DialEP(ctx, l.Addr().String(), cfg)
	require.NoError(t, err)
	srv := <-srvc
	require.NotNil(t, srv)
	require.Same(t, pd, cli.PD())
	require.Same(t, cq, srv.RecvCQ())

	copy(mr.Bytes(), "written remotely")
	c, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer c.Free()
	c.Reserve(1).SetWrite(0, 7, hand.Signaled, mr.SGE(0, 16), mr.Addr()+4096, mr.RKey())
	require.NoError(t, c.PostSendRaw(cli.QP().Raw()))
	require.Equal(t, verbs.WCSuccess, ctlReap(t, cq, 1)[0].Status)
	require.Equal(t, "written remotely", string(mr.Bytes()[4096:4096+16]))

	require.NoError(t, cli.Close())
	require.NoError(t, srv.Close())
	require.NoError(t, l.Close())

	other, _ := ctlDevice(t)
	opd, err := other.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, opd)
	_, err = hand.DialEP(ctx, l.Addr().String(), hand.ConnConfig{PD: opd})
	var ae *hand.AttrError
	require.ErrorAs(t, err, &ae)
	require.ErrorContains(t, err, "hand.CMContext")
	t.Log(err)

	_, err = hand.ListenEP(ctx, "0.0.0.0:0", hand.ConnConfig{})
	require.ErrorAs(t, err, &ae, "a wildcard listener needs a PD")
	t.Log(err)
	_, err = hand.DialEP(ctx, l.Addr().String(), hand.ConnConfig{PrivateData: make([]byte, 57)})
	require.ErrorAs(t, err, &ae)
}

// A port nobody listens on is refused, saying so; an address nobody
// answers for fails inside rdma_create_ep with its errno, or, when the
// context ends first, returns at once with the context's error.
func TestControlCMEPDialFailures(t *testing.T) {
	l := cmepListen(t, hand.ConnConfig{})
	port := l.Addr()
	require.NoError(t, l.Close())

	start := time.Now()
	_, err := hand.DialEP(ctlContext(t, 20*time.Second), port.String(), hand.ConnConfig{})
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.ErrorContains(t, err, "no listener at that address and port")
	t.Logf("%v (after %v)", err, time.Since(start))

	nobody := "192.0.2.99:7471"
	start = time.Now()
	_, err = hand.DialEP(context.Background(), nobody, hand.ConnConfig{})
	took := time.Since(start)
	t.Logf("%v (after %v)", err, took)
	require.ErrorContains(t, err, "creating the endpoint: rdma_create_ep: ")
	var ve *hand.VerbError
	require.ErrorAs(t, err, &ve)
	require.True(t, errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENODATA),
		"resolution errno: %v", err)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = hand.DialEP(ctx, nobody, hand.ConnConfig{})
	took = time.Since(start)
	t.Logf("%v (after %v)", err, took)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "rdma_create_ep")
	require.Less(t, took, time.Second, "an ended context does not wait for rdma_create_ep")
}

// An accepted Conn's QP reports the caps the provider granted:
// rdma_get_request makes the QP from a copy of the listener's attributes,
// into which the granted caps go and are lost, so Caps must come from the
// QP itself. rxe grants more than these caps ask: its queues hold a power
// of two less one WRs, and a send WQE sized for 4 SGEs holds 64 bytes of
// inline data, which it grants.
//
// A dialled Conn's caps are what rdma_create_qp's reply said, as for
// PD.NewQP. Linux 6.1's rxe (the VM's) replies with the WR counts as asked
// and sizes the queues after, so only the inline data and SGEs of the two
// sides are compared.
func TestControlCMEPGrantedCaps(t *testing.T) {
	asked := hand.QPCaps{MaxSendWR: 10, MaxRecvWR: 10, MaxSendSGE: 4, MaxRecvSGE: 1, MaxInlineData: 20}
	l := cmepListen(t, hand.ConnConfig{Caps: asked})
	srvc := cmepServe(t, l)
	cli, err := hand.DialEP(ctlContext(t, 20*time.Second), l.Addr().String(), hand.ConnConfig{Caps: asked})
	require.NoError(t, err)
	ctlCloseLater(t, cli)
	srv := <-srvc
	require.NotNil(t, srv)
	ctlCloseLater(t, srv)

	_, ia, err := srv.QP().Query()
	require.NoError(t, err)
	granted := hand.QPCaps{MaxSendWR: int(ia.Cap.MaxSendWR), MaxRecvWR: int(ia.Cap.MaxRecvWR),
		MaxSendSGE: int(ia.Cap.MaxSendSGE), MaxRecvSGE: int(ia.Cap.MaxRecvSGE), MaxInlineData: int(ia.Cap.MaxInlineData)}
	got, dialled := srv.QP().Caps(), cli.QP().Caps()
	t.Logf("asked %+v; accepted: ibv_query_qp %+v, Caps %+v; dialled: Caps %+v", asked, granted, got, dialled)
	require.NotEqual(t, asked.MaxInlineData, granted.MaxInlineData, "rxe should have granted more inline data than asked")
	require.Equal(t, granted, got, "the accepted Conn's Caps are what ibv_query_qp reports")
	require.Equal(t, []int{dialled.MaxSendSGE, dialled.MaxRecvSGE, dialled.MaxInlineData},
		[]int{got.MaxSendSGE, got.MaxRecvSGE, got.MaxInlineData}, "SGEs and inline data, dialled and accepted")
	require.GreaterOrEqual(t, got.MaxSendWR, dialled.MaxSendWR)
}

func TestControlCMEPAcceptCancelledAndClosed(t *testing.T) {
	l := cmepListen(t, hand.ConnConfig{})
	ctlRequireAcceptEnds(t, "EPListener", func(ctx context.Context) error { _, err := l.Accept(ctx); return err }, l.Close)
}
