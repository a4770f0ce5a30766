package rxe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// NewConn and the client's steps (Bind, ResolveAddr, ResolveRoute,
// CreateQP, Connect) on the soft-RoCE device: a connection made one step
// at a time, Close at every step, a failed step, the source address the
// listener sees, and ContextOf's handle on librdmacm's device context.

// stepsDial is Dial done by hand, one step at a time: on failure the Conn
// is closed (a no-op once a failed Connect has closed it).
func stepsDial(ctx context.Context, addr string, cfg hand.ConnConfig) (*hand.Conn, error) {
	return stepsDialBound(ctx, addr, cfg, netip.AddrPort{})
}

// stepsDialBound is stepsDial with Bind(bind) first, when bind is valid.
func stepsDialBound(ctx context.Context, addr string, cfg hand.ConnConfig, bind netip.AddrPort) (*hand.Conn, error) {
	c, err := hand.NewConn(cfg)
	if err != nil {
		return nil, err
	}
	if bind.IsValid() {
		if err := c.Bind(bind); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	for _, step := range []func() error{
		func() error { return c.ResolveAddr(ctx, addr) },
		func() error { return c.ResolveRoute(ctx) },
		c.CreateQP,
		func() error { return c.Connect(ctx) },
	} {
		if err := step(); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	return c, nil
}

// A connection made one step at a time, RNR retries off on both sides:
// the client posts its receives between CreateQP and Connect (no hook),
// the server its own in BeforeConnect. The server sends at once when
// Accept returns, the client echoes every message back at once, and every
// message arrives on both sides: a receive missing on either would fail
// its send with IBV_WC_RNR_RETRY_EXC_ERR. Between the steps the Conn says
// what is known: the peer's address from ResolveRoute on, the QP from
// CreateQP on.
func TestCMStepsEcho(t *testing.T) {
	l := ctlListen(t)
	base := hand.ConnConfig{Caps: hand.QPCaps{MaxSendWR: bcMsgs, MaxRecvWR: bcMsgs}, RNRRetryCount: hand.NoRetry}
	var srvMR *hand.MR
	srvCfg := base
	srvCfg.BeforeConnect = func(c *hand.Conn) (err error) {
		srvMR, err = bcPostRecvs(c)
		return err
	}
	type accepted struct {
		c      *hand.Conn
		sendMR *hand.MR
		err    error
	}
	srvc := make(chan accepted, 1)
	go func() {
		ctx := ctlContext(t, 20*time.Second)
		req, err := l.Accept(ctx)
		if err != nil {
			srvc <- accepted{err: err}
			return
		}
		c, err := req.Accept(ctx, srvCfg)
		var mr *hand.MR
		if err == nil {
			// At once: the client's receives must be there already.
			mr, err = stepsSend(c, "message")
		}
		srvc <- accepted{c, mr, err}
	}()

	ctx := ctlContext(t, 20*time.Second)
	cli, err := hand.NewConn(base)
	require.NoError(t, err)
	ctlCloseLater(t, cli)
	require.NotNil(t, cli.Raw(), "the id exists from NewConn on")
	require.NoError(t, cli.ResolveAddr(ctx, l.Addr().String()))
	require.NotNil(t, cli.Raw().Verbs, "ResolveAddr found the device")
	require.NoError(t, cli.ResolveRoute(ctx))
	require.Equal(t, l.Addr(), cli.RemoteAddr(), "the peer's address, known from ResolveRoute")
	require.Nil(t, cli.QP(), "no QP before CreateQP")
	require.NoError(t, cli.CreateQP())
	require.NotNil(t, cli.QP())
	cliMR, err := bcPostRecvs(cli) // between CreateQP and Connect
	require.NoError(t, err)
	ctlCloseLater(t, cliMR)
	require.NoError(t, cli.Connect(ctx))
	a := <-srvc
	require.NoError(t, a.err)
	srv := a.c
	ctlCloseLater(t, srv)
	ctlCloseLater(t, srvMR)
	ctlCloseLater(t, a.sendMR)
	require.Equal(t, cli.LocalAddr(), srv.RemoteAddr())

	for i, wc := range ctlReap(t, srv.SendCQ(), bcMsgs) {
		require.Equal(t, hand.StatusSuccess, wc.Status, "server's send %d: %s", i, wcStatus(wc.Status))
	}
	var got []string
	for i, wc := range ctlReap(t, cli.RecvCQ(), bcMsgs) {
		require.Equal(t, hand.StatusSuccess, wc.Status, "client's receive %d: %s", wc.WRID, wcStatus(wc.Status))
		got = append(got, string(cliMR.Bytes()[wc.WRID*64:wc.WRID*64+uint64(wc.ByteLen)]))
		require.Equal(t, fmt.Sprintf("message %d", i), got[i])
	}
	echoMR, err := stepsSend(cli, "echo of message")
	require.NoError(t, err)
	ctlCloseLater(t, echoMR)
	for i, wc := range ctlReap(t, cli.SendCQ(), bcMsgs) {
		require.Equal(t, hand.StatusSuccess, wc.Status, "client's send %d: %s", i, wcStatus(wc.Status))
	}
	for i, wc := range ctlReap(t, srv.RecvCQ(), bcMsgs) {
		require.Equal(t, hand.StatusSuccess, wc.Status, "server's receive %d: %s", wc.WRID, wcStatus(wc.Status))
		require.Equal(t, fmt.Sprintf("echo of message %d", i), string(srvMR.Bytes()[wc.WRID*64:wc.WRID*64+uint64(wc.ByteLen)]))
	}
	t.Logf("%d messages each way, the client's receives posted between CreateQP and Connect", bcMsgs)

	// The server answers the client's disconnect request.
	waited := make(chan error, 1)
	go func() { waited <- srv.WaitDisconnect(ctx) }()
	require.NoError(t, cli.Disconnect(ctx))
	require.NoError(t, <-waited)
	require.ErrorIs(t, cli.Connect(ctx), syscall.EINVAL, "Connect again")
}

// stepsSend sends bcMsgs messages "prefix i" at once on c, signalled,
// from an MR on c's PD, which it returns: close it after the sends
// complete, before c.
func stepsSend(c *hand.Conn, prefix string) (*hand.MR, error) {
	mr, err := c.PD().Alloc(bcMsgs*64, hand.AccessLocalWrite)
	if err != nil {
		return nil, err
	}
	sc, err := hand.NewSendChain(bcMsgs, 1, 0)
	if err != nil {
		return nil, errors.Join(err, mr.Close())
	}
	defer sc.Close()
	v := sc.Reserve(bcMsgs)
	for i := range bcMsgs {
		msg := fmt.Sprintf("%s %d", prefix, i)
		copy(mr.Bytes()[i*64:], msg)
		v.SetSend(i, uint64(i), hand.Signaled, mr.SGE(i*64, len(msg)))
	}
	if err := sc.PostSendv(c); err != nil {
		return nil, errors.Join(err, mr.Close())
	}
	return mr, nil
}

// Close at every step releases what the steps made: it returns nil, a
// second Close too, and the next step returns ErrClosed; after CreateQP,
// the Conn's own PD is gone with it, and a user's MR on that PD makes
// Close refuse (*BusyError), closing nothing, until it is closed. A Close
// during ResolveAddr's wait ends the wait with ErrClosed.
func TestCMStepsCloseAtEveryStep(t *testing.T) {
	l := ctlListen(t)
	ctx := ctlContext(t, 20*time.Second)
	local := netip.AddrPortFrom(ctlAddr(t), 0)
	steps := []struct {
		name string
		do   func(c *hand.Conn) error
	}{
		{"Bind", func(c *hand.Conn) error { return c.Bind(local) }},
		{"ResolveAddr", func(c *hand.Conn) error { return c.ResolveAddr(ctx, l.Addr().String()) }},
		{"ResolveRoute", func(c *hand.Conn) error { return c.ResolveRoute(ctx) }},
		{"CreateQP", func(c *hand.Conn) error { return c.CreateQP() }},
		{"Connect", func(c *hand.Conn) error { return c.Connect(ctx) }},
	}
	for k := 0; k < len(steps); k++ {
		c, err := hand.NewConn(hand.ConnConfig{})
		require.NoError(t, err)
		for _, s := range steps[:k] {
			require.NoError(t, s.do(c), s.name)
		}
		after := "NewConn"
		if k > 0 {
			after = steps[k-1].name
		}
		if pd := c.PD(); pd != nil {
			mr, err := pd.Alloc(4096, hand.AccessLocalWrite)
			require.NoError(t, err)
			var be *hand.BusyError
			require.ErrorAs(t, c.Close(), &be, "Close with an MR on the Conn's own PD")
			t.Logf("after %s: %v", after, be)
			require.NotNil(t, c.QP(), "a refused Close closes nothing")
			require.NoError(t, mr.Close())
		}
		require.NoError(t, c.Close(), "Close after %s", after)
		require.NoError(t, c.Close(), "second Close after %s", after)
		require.ErrorIs(t, steps[k].do(c), hand.ErrClosed, "%s after Close", steps[k].name)
		if pd := c.PD(); pd != nil {
			_, err := pd.Alloc(4096, hand.AccessLocalWrite)
			require.ErrorIs(t, err, hand.ErrClosed, "the Conn's own PD after its Close")
		}
		t.Logf("closed after %s", after)
	}

	// Close while ResolveAddr waits for an address nobody answers for.
	c, err := hand.NewConn(hand.ConnConfig{StepTimeout: 10 * time.Second})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- c.ResolveAddr(ctx, "192.0.2.99:7471") }()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	require.NoError(t, c.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, hand.ErrClosed, "ResolveAddr ended by Close")
		t.Logf("ResolveAddr ended %v after Close: %v", time.Since(start), err)
	case <-time.After(5 * time.Second):
		t.Fatal("ResolveAddr still waits 5 s after Close")
	}
}

// A step that fails leaves only Close: ResolveAddr to an address nobody
// answers for fails with the step named, the next step says so (EINVAL),
// and Close releases the rest. A Connect to a port nobody listens on
// fails with ECONNREFUSED and closes the Conn itself.
func TestCMStepsFailedStep(t *testing.T) {
	RequireDevice(t)
	ctx := ctlContext(t, 20*time.Second)
	c, err := hand.NewConn(hand.ConnConfig{StepTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	err = c.ResolveAddr(ctx, "192.0.2.99:7471")
	require.Error(t, err)
	require.ErrorContains(t, err, "goverbs: Conn.ResolveAddr 192.0.2.99:7471: ")
	t.Log(err)
	err = c.ResolveRoute(ctx)
	require.ErrorIs(t, err, syscall.EINVAL)
	require.EqualError(t, err, "goverbs: Conn.ResolveRoute: ResolveAddr failed: only Close is left")
	require.NoError(t, c.Close())

	l := ctlListen(t)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	c, err = hand.NewConn(hand.ConnConfig{})
	require.NoError(t, err)
	require.NoError(t, c.ResolveAddr(ctx, addr))
	require.NoError(t, c.ResolveRoute(ctx))
	require.NoError(t, c.CreateQP())
	err = c.Connect(ctx)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.ErrorContains(t, err, "goverbs: Conn.Connect "+addr+": ")
	t.Log(err)
	require.ErrorIs(t, c.Disconnect(ctx), hand.ErrClosed, "a failed Connect closed the Conn")
	require.NoError(t, c.Close())
}

// The source address: Dial, NewConn's steps (Bind, and ConnConfig.LocalAddr
// taken by ResolveAddr), DialEP and DialUD each go out from the address
// and port given, and the listener sees that as the client's address;
// port 0 picks one, which both sides then agree on.
func TestCMLocalAddr(t *testing.T) {
	RequireDevice(t)
	ip := ctlAddr(t)
	ctx := ctlContext(t, 30*time.Second)
	// Ports no test listens on, one per case: a port just closed may wait
	// out its TIMEWAIT.
	port := func(i int) netip.AddrPort { return netip.AddrPortFrom(ip, uint16(47100+i)) }
	rcCases := []struct {
		name  string
		local netip.AddrPort
		ep    bool // the listener and the dial on the rdma_create_ep path
		dial  func(addr string, local netip.AddrPort) (*hand.Conn, error)
	}{
		{"Dial", port(1), false, func(addr string, local netip.AddrPort) (*hand.Conn, error) {
			return hand.Dial(ctx, addr, hand.ConnConfig{LocalAddr: local})
		}},
		{"Dial_any_port", netip.AddrPortFrom(ip, 0), false, func(addr string, local netip.AddrPort) (*hand.Conn, error) {
			return hand.Dial(ctx, addr, hand.ConnConfig{LocalAddr: local})
		}},
		{"Steps_Bind", port(2), false, func(addr string, local netip.AddrPort) (*hand.Conn, error) {
			return stepsDialBound(ctx, addr, hand.ConnConfig{}, local)
		}},
		{"Steps_LocalAddr", port(3), false, func(addr string, local netip.AddrPort) (*hand.Conn, error) {
			return stepsDial(ctx, addr, hand.ConnConfig{LocalAddr: local})
		}},
		{"DialEP", port(4), true, func(addr string, local netip.AddrPort) (*hand.Conn, error) {
			return hand.DialEP(ctx, addr, hand.ConnConfig{LocalAddr: local})
		}},
	}
	for _, tc := range rcCases {
		t.Run(tc.name, func(t *testing.T) {
			var addr string
			seen := make(chan netip.AddrPort, 1)
			srvDone := make(chan error, 1)
			if tc.ep {
				l, err := hand.ListenEP(ctx, netip.AddrPortFrom(ip, 0).String(), hand.ConnConfig{})
				require.NoError(t, err)
				ctlCloseLater(t, l)
				addr = l.Addr().String()
				go func() {
					c, err := l.Accept(ctx)
					if err != nil {
						close(seen)
						srvDone <- err
						return
					}
					seen <- c.RemoteAddr()
					srvDone <- errors.Join(c.WaitDisconnect(ctx), c.Close())
				}()
			} else {
				l := ctlListen(t)
				addr = l.Addr().String()
				go func() {
					req, err := l.Accept(ctx)
					if err != nil {
						close(seen)
						srvDone <- err
						return
					}
					seen <- req.RemoteAddr()
					c, err := req.Accept(ctx, hand.ConnConfig{})
					if err != nil {
						srvDone <- err
						return
					}
					srvDone <- errors.Join(c.WaitDisconnect(ctx), c.Close())
				}()
			}
			c, err := tc.dial(addr, tc.local)
			require.NoError(t, err)
			got, ok := <-seen
			if !ok {
				t.Fatalf("the listener got no request: %v", <-srvDone)
			}
			require.Equal(t, c.LocalAddr(), got, "the client's address, as the listener sees it")
			require.Equal(t, tc.local.Addr(), got.Addr())
			if tc.local.Port() != 0 {
				require.Equal(t, tc.local, got)
			} else {
				require.NotZero(t, got.Port())
			}
			t.Logf("LocalAddr %s: the listener saw %s", tc.local, got)
			require.NoError(t, c.Disconnect(ctx))
			require.NoError(t, c.Close())
			require.NoError(t, <-srvDone, "the server")
		})
	}
	t.Run("DialUD", func(t *testing.T) {
		l, err := hand.ListenUD(ctx, netip.AddrPortFrom(ip, 0).String())
		require.NoError(t, err)
		ctlCloseLater(t, l)
		type accepted struct {
			seen netip.AddrPort
			c    *hand.UDConn
			err  error
		}
		srvc := make(chan accepted, 1)
		go func() {
			req, err := l.Accept(ctx)
			if err != nil {
				srvc <- accepted{err: err}
				return
			}
			c, err := req.Accept(ctx, hand.UDConfig{})
			srvc <- accepted{req.RemoteAddr(), c, err}
		}()
		c, err := hand.DialUD(ctx, l.Addr().String(), hand.UDConfig{LocalAddr: port(5)})
		require.NoError(t, err)
		ctlCloseLater(t, c)
		a := <-srvc
		require.NoError(t, a.err)
		ctlCloseLater(t, a.c)
		require.Equal(t, port(5), a.seen, "the client's address, as the UD listener sees it")
		require.Equal(t, port(5), c.LocalAddr())
	})
}

// ContextOf gives hand's handle on librdmacm's device context from the raw
// pointer: for a Conn's id it is on the Conn's device (the same
// ibv_context as Conn.Context's), its PD backs another Dial's Conn
// (ConnConfig.PD is refused from any other context), and for an id made
// through generated/rdmacm its PD and CQ make that id's QP
// (rdma_create_qp), and come back to hand. A context librdmacm did not
// open is refused.
func TestCMContextOf(t *testing.T) {
	name, _ := RequireDevice(t)
	l := ctlListen(t)
	srvc := ctlServe(t, l, func(*hand.ConnRequest) hand.ConnConfig { return hand.ConnConfig{} })
	ctx := ctlContext(t, 20*time.Second)
	c, err := hand.Dial(ctx, l.Addr().String(), hand.ConnConfig{})
	require.NoError(t, err)
	ctlCloseLater(t, c)
	ctlCloseLater(t, <-srvc)

	hctx, err := hand.ContextOf(c.Raw().Verbs)
	require.NoError(t, err)
	ctlCloseLater(t, hctx)
	require.Same(t, c.Context().Raw(), hctx.Raw())
	require.Equal(t, name, hctx.Name())
	require.Equal(t, c.Context().Name(), hctx.Name())

	pd, err := hctx.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, pd)
	srvc = ctlServe(t, l, func(*hand.ConnRequest) hand.ConnConfig { return hand.ConnConfig{} })
	c2, err := hand.Dial(ctx, l.Addr().String(), hand.ConnConfig{PD: pd})
	require.NoError(t, err, "a Dial with the PD of ContextOf's handle")
	ctlCloseLater(t, c2)
	ctlCloseLater(t, <-srvc)
	require.Same(t, pd, c2.PD())

	// An id made through generated/rdmacm, to the listener.
	_, id := cmResolved(t, l.Addr())
	rctx, err := hand.ContextOf(id.Verbs)
	require.NoError(t, err)
	ctlCloseLater(t, rctx)
	rpd, err := rctx.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, rpd)
	rcq, err := rctx.NewCQ(8, hand.CQOptions{})
	require.NoError(t, err)
	ctlCloseLater(t, rcq)
	attr := verbs.QPInitAttr{SendCQ: rcq.Raw(), RecvCQ: rcq.Raw(), QPType: verbs.QPTRC,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
	require.NoError(t, rdmacm.CreateQP(id, rpd.Raw(), &attr), "rdma_create_qp with ContextOf's PD and CQ")
	t.Cleanup(func() { rdmacm.DestroyQP(id) }) // before the CQ and PD close
	require.Same(t, rpd.Raw(), id.QP.PD)

	var ae *hand.AttrError
	_, err = hand.ContextOf(&verbs.Context{})
	require.ErrorAs(t, err, &ae, "a context librdmacm did not open")
	t.Log(err)
	own, err := hand.Open(name)
	require.NoError(t, err)
	ctlCloseLater(t, own)
	_, err = hand.ContextOf(own.Raw())
	require.ErrorAs(t, err, &ae, "hand.Open's context")
}
