package rxe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

func ctlListen(t *testing.T) *hand.Listener {
	t.Helper()
	RequireDevice(t)
	l, err := hand.Listen(ctlContext(t, 10*time.Second), netip.AddrPortFrom(ctlAddr(t), 0).String())
	require.NoError(t, err)
	require.NotZero(t, l.Addr().Port(), "port 0 picks one")
	ctlCloseLater(t, l)
	return l
}

// ctlServe accepts one connection with cfg and hands it (or the error) back.
func ctlServe(t *testing.T, l *hand.Listener, cfg func(*hand.ConnRequest) hand.ConnConfig) <-chan *hand.Conn {
	t.Helper()
	out := make(chan *hand.Conn, 1)
	go func() {
		defer close(out)
		ctx := ctlContext(t, 20*time.Second)
		req, err := l.Accept(ctx)
		if err != nil {
			t.Errorf("Accept: %v", err)
			return
		}
		c, err := req.Accept(ctx, cfg(req))
		if err != nil {
			t.Errorf("ConnRequest.Accept: %v", err)
			return
		}
		out <- c
	}()
	return out
}

// Listen, Accept and Dial with private data both ways; data over the
// connection; Disconnect seen by the peer; Close refuses while an MR on the
// Conn's own PD lives.
func TestControlCMConnect(t *testing.T) {
	l := ctlListen(t)
	var reqData []byte
	var reqFrom netip.AddrPort
	srvc := ctlServe(t, l, func(r *hand.ConnRequest) hand.ConnConfig {
		reqData, reqFrom = r.PrivateData(), r.RemoteAddr()
		return hand.ConnConfig{PrivateData: []byte("welcome")}
	})
	ctx := ctlContext(t, 20*time.Second)
	cli, err := hand.Dial(ctx, l.Addr().String(), hand.ConnConfig{PrivateData: []byte("hello")})
	require.NoError(t, err)
	srv := <-srvc
	require.NotNil(t, srv)

	require.True(t, bytes.HasPrefix(reqData, []byte("hello")), "request data %q", reqData)
	require.True(t, bytes.HasPrefix(cli.PeerPrivateData(), []byte("welcome")), "accept data %q", cli.PeerPrivateData())
	require.True(t, bytes.HasPrefix(srv.PeerPrivateData(), []byte("hello")))
	require.Equal(t, l.Addr(), cli.RemoteAddr())
	require.Equal(t, cli.LocalAddr(), srv.RemoteAddr())
	require.Equal(t, cli.LocalAddr(), reqFrom)
	t.Logf("client %s -> server %s on %s, QPs %d and %d", cli.LocalAddr(), srv.LocalAddr(), cli.Context().Name(), cli.QP().Num(), srv.QP().Num())
	for _, c := range []*hand.Conn{cli, srv} {
		s, err := c.QP().State()
		require.NoError(t, err)
		require.Equal(t, verbs.QPSRts, s)
		require.Equal(t, c.QP().Raw(), c.Raw().QP)
	}
	// The QP is the Conn's: closed alone, the Conn's posts would reach a
	// QP librdmacm had destroyed.
	var owned *hand.BusyError
	require.ErrorAs(t, cli.QP().Close(), &owned)
	require.Equal(t, "its Conn", owned.Owner)

	// Data: buffers registered on each Conn's own PD.
	smr, err := srv.PD().Alloc(4096, hand.AccessLocalWrite)
	require.NoError(t, err)
	cmr, err := cli.PD().Alloc(4096, hand.AccessLocalWrite)
	require.NoError(t, err)
	copy(cmr.Bytes(), "over rdma_cm")
	ctlPostRecv(t, srv.QP(), smr, 1, 1, 0, 4096)
	ctlPostSend(t, cli.QP(), cmr, 2, 0, 12)
	require.Equal(t, verbs.WCSuccess, ctlReap(t, cli.SendCQ(), 1)[0].Status)
	wc := ctlReap(t, srv.RecvCQ(), 1)[0]
	require.Equal(t, verbs.WCSuccess, wc.Status)
	require.Equal(t, "over rdma_cm", string(smr.Bytes()[:wc.ByteLen]))

	// The MR on the Conn's own PD, and a PD made on the Conn's Context,
	// keep the Conn open, with nothing torn down (the disconnect below
	// needs the id).
	upd, err := srv.Context().AllocPD()
	require.NoError(t, err)
	var busy *hand.BusyError
	require.ErrorAs(t, srv.Close(), &busy)
	require.Len(t, busy.Children, 2, "%v", busy)
	require.Contains(t, busy.Error(), "MR lkey")
	require.Contains(t, busy.Error(), "PD ")
	require.NoError(t, upd.Close())

	// Disconnect and WaitDisconnect on one Conn at once: whichever reads
	// the DISCONNECTED event, both return with it, not one at the next
	// event (TIMEWAIT_EXIT, about 2.2 s later on rxe, or none).
	waited := make(chan error, 1)
	go func() { waited <- srv.WaitDisconnect(ctlContext(t, 20*time.Second)) }()
	cliWaited := make(chan time.Time, 1)
	go func() {
		err := cli.WaitDisconnect(ctx)
		assert.NoError(t, err, "the client's WaitDisconnect")
		cliWaited <- time.Now()
	}()
	start := time.Now()
	require.NoError(t, cli.Disconnect(ctx))
	disconnected := time.Now()
	require.NoError(t, <-waited)
	t.Logf("disconnected in %v", disconnected.Sub(start))
	var waitedAt time.Time
	select {
	case waitedAt = <-cliWaited:
	case <-time.After(20 * time.Second):
		t.Fatal("the client's WaitDisconnect had not returned 20 s after its Disconnect")
	}
	t.Logf("the client's Disconnect returned after %v, its WaitDisconnect after %v", disconnected.Sub(start), waitedAt.Sub(start))
	// Both returned before that next event, however slow the VM, rather
	// than within a fixed bound (1 s was; unloaded they take a few
	// milliseconds). It comes to both sides within a millisecond of each
	// other, so a waiter that waited for its own would return no sooner
	// than the server's is readable; nobody reads the server's channel.
	// 50 ms is for the two sides' timers and for seeing it late.
	next, err := readableWithin(srv.Raw().Channel.FD, 10*time.Second)
	if err != nil {
		t.Logf("no event on the server's channel 10 s after both calls returned (%v): none to have waited for", err)
	} else {
		t.Logf("the next event on the server's channel (TIMEWAIT_EXIT) came %v after the Disconnect", next.Sub(start))
		for _, at := range []time.Time{disconnected, waitedAt} {
			require.Less(t, at.Sub(start), next.Add(-50*time.Millisecond).Sub(start), "the second waiter waited for another event")
		}
	}
	s, err := srv.QP().State()
	require.NoError(t, err)
	require.Equal(t, verbs.QPSErr, s, "disconnect moves the QP to ERR")

	require.NoError(t, smr.Close())
	require.NoError(t, cmr.Close())
	require.NoError(t, srv.Close())
	require.NoError(t, cli.Close())
	require.NoError(t, cli.Close(), "second Close")
	require.ErrorIs(t, cli.Disconnect(ctx), hand.ErrClosed)
	require.ErrorIs(t, srv.WaitDisconnect(ctx), hand.ErrClosed)
}

// readableWithin waits up to d for fd to be readable and says when it was.
func readableWithin(fd int32, d time.Duration) (time.Time, error) {
	deadline := time.Now().Add(d)
	err := waitReadable(fd, deadline)
	if now := time.Now(); err == nil || now.Before(deadline) {
		return now, err
	}
	return time.Time{}, fmt.Errorf("fd %d not readable within %v", fd, d)
}

// PD, CQ and MR made up front on librdmacm's context serve any number of
// connections; a PD from an ibv_open_device context is refused with advice.
func TestControlCMSharedResources(t *testing.T) {
	name, pd, cq, mr := cmShared(t)

	l := ctlListen(t)
	require.NotNil(t, l.Context(), "a listener on a device address knows its device")
	require.Equal(t, name, l.Context().Name())
	cfg := hand.ConnConfig{PD: pd, SendCQ: cq}
	srvc := ctlServe(t, l, func(*hand.ConnRequest) hand.ConnConfig { return cfg })
	ctx := ctlContext(t, 20*time.Second)
	cli, err := hand.Dial(ctx, l.Addr().String(), cfg)
	require.NoError(t, err)
	srv := <-srvc
	require.NotNil(t, srv)
	require.Same(t, pd, cli.PD())
	require.Same(t, cq, srv.RecvCQ())

	// RDMA write from the client's half of the MR into the server's half.
	copy(mr.Bytes(), "written remotely")
	c, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	c.Reserve(1).SetWrite(0, 7, hand.Signaled, mr.SGE(0, 16), mr.Addr()+4096, mr.RKey())
	require.NoError(t, c.PostSendRaw(cli.QP().Raw()))
	require.Equal(t, verbs.WCSuccess, ctlReap(t, cq, 1)[0].Status)
	require.Equal(t, "written remotely", string(mr.Bytes()[4096:4096+16]))

	var busy *hand.BusyError
	require.ErrorAs(t, pd.Close(), &busy, "the Conns' QPs use the PD")
	require.Len(t, busy.Children, 3, "two QPs and the MR")
	require.NoError(t, cli.Close())
	require.NoError(t, srv.Close())

	// A PD from ibv_open_device is another ibv_context: refused.
	other, _ := ctlDevice(t)
	opd, err := other.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, opd)
	_, err = hand.Dial(ctx, l.Addr().String(), hand.ConnConfig{PD: opd})
	var ae *hand.AttrError
	require.ErrorAs(t, err, &ae)
	require.ErrorContains(t, err, "hand.CMContext")
	t.Log(err)
}

func TestControlCMReject(t *testing.T) {
	l := ctlListen(t)
	go func() {
		req, err := l.Accept(ctlContext(t, 20*time.Second))
		if err != nil {
			t.Errorf("Accept: %v", err)
			return
		}
		if err := req.Reject([]byte("go away")); err != nil {
			t.Errorf("Reject: %v", err)
		}
		if err := req.Reject(nil); !errors.Is(err, hand.ErrClosed) {
			t.Errorf("second Reject: %v, want ErrClosed", err)
		}
	}()
	_, err := hand.Dial(ctlContext(t, 20*time.Second), l.Addr().String(), hand.ConnConfig{})
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	var ce *hand.CMEventError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, rdmacm.CMEventRejected, ce.Event)
	require.True(t, bytes.HasPrefix(ce.PrivateData, []byte("go away")), "reject data %q", ce.PrivateData)
	require.ErrorContains(t, err, "rejected by the listener")
	t.Log(err)
}

// Dialling a port nobody listens on fails fast and says so; dialling an
// address nobody answers for fails when the context's deadline passes, or
// when the resolution step times out, naming the step.
func TestControlCMDialFailures(t *testing.T) {
	l := ctlListen(t)
	port := l.Addr()
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "second Close")

	start := time.Now()
	_, err := hand.Dial(ctlContext(t, 20*time.Second), port.String(), hand.ConnConfig{})
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.ErrorContains(t, err, "no listener at that address and port")
	t.Logf("%v (after %v)", err, time.Since(start))

	nobody := "192.0.2.99:7471"
	start = time.Now()
	// 200 ms: well before the kernel gives up on the neighbour (300 ms and
	// more was seen), so the context's deadline is what ends the dial.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = hand.Dial(ctx, nobody, hand.ConnConfig{StepTimeout: 10 * time.Second})
	took := time.Since(start)
	t.Logf("%v (after %v)", err, took)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "dial "+nobody+": resolving the address")
	require.Less(t, took, 5*time.Second)

	start = time.Now()
	_, err = hand.Dial(context.Background(), nobody, hand.ConnConfig{StepTimeout: 300 * time.Millisecond})
	t.Logf("%v (after %v)", err, time.Since(start))
	require.Error(t, err)
	require.ErrorContains(t, err, "dial "+nobody+": resolving the address")
	require.True(t, errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENODATA),
		"resolution timeout errno: %v", err)
}

func TestControlCMAcceptCancelledAndClosed(t *testing.T) {
	l := ctlListen(t)
	ctlRequireAcceptEnds(t, "Listener", func(ctx context.Context) error { _, err := l.Accept(ctx); return err }, l.Close)
}

// ctlRequireAcceptEnds checks that a listener's Accept, blocked, returns
// context.Canceled when its context is cancelled and ErrClosed when the
// listener (named in the failure) closes, and that Accept after Close is
// ErrClosed at once.
func ctlRequireAcceptEnds(t *testing.T, name string, accept func(context.Context) error, closeListener func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- accept(ctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)

	go func() { errc <- accept(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, closeListener())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, hand.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatalf("%s.Close did not wake Accept", name)
	}
	require.ErrorIs(t, accept(context.Background()), hand.ErrClosed)
}

// What a Listener and a ConnRequest say of themselves stays readable once
// their rdma_cm id is freed: Listener.Context after Close, and a request's
// RemoteAddr and Context after Reject. They read the freed id before (a
// fault, or an address from freed memory). And a ConnRequest.Accept whose
// context has ended rejects at once, accepting nothing: the client is
// refused, and the call does not wait out the kernel's TIMEWAIT (a minute
// on rxe) as it would had it accepted first.
// A ConnConfig that Accept cannot carry is refused before anything is
// made, naming the field, and leaves the request pending: a second Accept
// with a good one connects the waiting client.
func TestControlCMAcceptBadConfig(t *testing.T) {
	l := ctlListen(t)
	dialed := make(chan error, 1)
	go func() {
		c, err := hand.Dial(ctlContext(t, 20*time.Second), l.Addr().String(), hand.ConnConfig{})
		if err == nil {
			err = c.Close()
		}
		dialed <- err
	}()
	req, err := l.Accept(ctlContext(t, 20*time.Second))
	require.NoError(t, err)
	var ae *hand.AttrError
	_, err = req.Accept(ctlContext(t, 20*time.Second), hand.ConnConfig{Caps: hand.QPCaps{MaxSendWR: 1 << 32}})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "Caps.MaxSendWR", ae.Field)
	t.Log(err)
	_, err = req.Accept(ctlContext(t, 20*time.Second), hand.ConnConfig{RetryCount: 8})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "RetryCount", ae.Field)
	c, err := req.Accept(ctlContext(t, 20*time.Second), hand.ConnConfig{})
	require.NoError(t, err, "the request stays pending after a refused config")
	require.NoError(t, <-dialed)
	require.NoError(t, c.Close())
}

func TestControlCMRequestAfterEnd(t *testing.T) {
	l := ctlListen(t)
	dev := l.Context()
	require.NotNil(t, dev, "bound to the VM's address, not a wildcard")
	dial := func() <-chan error {
		out := make(chan error, 1)
		go func() {
			c, err := hand.Dial(ctlContext(t, 20*time.Second), l.Addr().String(), hand.ConnConfig{})
			if err == nil {
				c.Close()
			}
			out <- err
		}()
		return out
	}

	dialed := dial()
	req, err := l.Accept(ctlContext(t, 20*time.Second))
	require.NoError(t, err)
	from := req.RemoteAddr()
	require.True(t, from.IsValid() && from.Port() != 0, "the client's address: %v", from)
	require.NoError(t, req.Reject(nil))
	require.Equal(t, from, req.RemoteAddr(), "after Reject")
	require.Equal(t, dev.Name(), req.Context().Name(), "after Reject")
	require.Error(t, <-dialed)

	dialed = dial()
	req, err = l.Accept(ctlContext(t, 20*time.Second))
	require.NoError(t, err)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	_, err = req.Accept(ended, hand.ConnConfig{})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 5*time.Second)
	err = <-dialed
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "rejected, not accepted and torn down")
	t.Log(err)

	require.NoError(t, l.Close())
	require.Equal(t, dev.Name(), l.Context().Name(), "after Close")
}
