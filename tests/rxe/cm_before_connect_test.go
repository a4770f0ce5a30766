package rxe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand"
)

// ConnConfig.BeforeConnect: receives posted before the peer can send, on
// both of rdma_cm's paths and on both sides, with RNR retries off, so that
// a send finding no receive fails at once (IBV_WC_RNR_RETRY_EXC_ERR)
// instead of waiting for one.

// bcPath is one of rdma_cm's two paths, for the tests below.
type bcPath struct {
	name string
	// listen starts a listener with cfg; accept takes its next request
	// and accepts it, with private data naming the client ("for ADDR")
	// when perConn, else with cfg's (EPListener.Accept on the EP path).
	listen func(t *testing.T, cfg hand.ConnConfig) (addr string, accept func(ctx context.Context, perConn bool) (*hand.Conn, error))
	dial   func(ctx context.Context, addr string, cfg hand.ConnConfig) (*hand.Conn, error)
}

func bcData(client netip.AddrPort) []byte { return []byte("for " + client.String()) }

// bcListen is the listening side of the rdma_create_id path: Listen, and
// ConnRequest.Accept.
func bcListen(t *testing.T, cfg hand.ConnConfig) (string, func(context.Context, bool) (*hand.Conn, error)) {
	l := ctlListen(t)
	return l.Addr().String(), func(ctx context.Context, perConn bool) (*hand.Conn, error) {
		req, err := l.Accept(ctx)
		if err != nil {
			return nil, err
		}
		c := cfg
		if perConn {
			c.PrivateData = bcData(req.RemoteAddr())
		}
		return req.Accept(ctx, c)
	}
}

var bcPaths = []bcPath{
	{name: "Dial", dial: hand.Dial, listen: bcListen},
	// NewConn and its steps, called one by one (cm_steps_test.go).
	{name: "Steps", dial: stepsDial, listen: bcListen},
	{name: "DialEP", dial: hand.DialEP, listen: func(t *testing.T, cfg hand.ConnConfig) (string, func(context.Context, bool) (*hand.Conn, error)) {
		l := cmepListen(t, cfg)
		return l.Addr().String(), func(ctx context.Context, perConn bool) (*hand.Conn, error) {
			if !perConn {
				return l.Accept(ctx)
			}
			req, err := l.GetRequest(ctx)
			if err != nil {
				return nil, err
			}
			// Too much data is refused before anything is sent, and the
			// request stays pending.
			var attrErr *hand.AttrError
			if _, err := req.AcceptWithData(ctx, make([]byte, 197)); !errors.As(err, &attrErr) || attrErr.Field != "data" {
				return nil, fmt.Errorf("AcceptWithData with 197 bytes: %v, want an *AttrError for data", err)
			}
			return req.AcceptWithData(ctx, bcData(req.Conn().RemoteAddr()))
		}
	}},
}

const bcMsgs = 4

// bcPostRecvs registers a buffer on c's PD and posts bcMsgs receives of 64
// bytes into it on c's rdma_cm id.
func bcPostRecvs(c *hand.Conn) (*hand.MR, error) {
	mr, err := c.PD().Alloc(bcMsgs*64, hand.AccessLocalWrite)
	if err != nil {
		return nil, err
	}
	rc, err := hand.NewRecvChain(bcMsgs, 1)
	if err != nil {
		return nil, errors.Join(err, mr.Close())
	}
	defer rc.Close()
	w := rc.Reserve(bcMsgs)
	for i := range bcMsgs {
		w.Set(i, uint64(i), mr.SGE(i*64, 64))
	}
	if err := rc.PostRecvv(c); err != nil {
		return nil, errors.Join(err, mr.Close())
	}
	return mr, nil
}

// On each path, the server receiving (the client sends as soon as Dial
// returns) and the client receiving (the server sends as soon as Accept
// returns), RNR retries off on both sides: with the receives posted in
// BeforeConnect, every message arrives, in order. The control posts them
// instead 200 ms after the connection is live, and the first send must fail
// with IBV_WC_RNR_RETRY_EXC_ERR: the test can tell the two apart. The
// server's accept carries private data naming the client (ConnRequest.Accept's
// ConnConfig, EPRequest.AcceptWithData), which the client must see.
func TestCMBeforeConnect(t *testing.T) {
	for _, p := range bcPaths {
		for _, side := range []string{"server", "client"} {
			for _, early := range []bool{true, false} {
				name := p.name + "/" + side + "_receives/" + map[bool]string{true: "in_BeforeConnect", false: "late_control"}[early]
				t.Run(name, func(t *testing.T) { bcRun(t, p, side == "server", early) })
			}
		}
	}
}

func bcRun(t *testing.T, p bcPath, serverReceives, early bool) {
	base := hand.ConnConfig{Caps: hand.QPCaps{MaxSendWR: bcMsgs, MaxRecvWR: bcMsgs}, RNRRetryCount: hand.NoRetry}
	srvCfg, cliCfg := base, base
	var rmr *hand.MR // the receiver's buffer
	hooked := 0
	hook := func(c *hand.Conn) error {
		hooked++
		var err error
		rmr, err = bcPostRecvs(c)
		return err
	}
	if early && serverReceives {
		srvCfg.BeforeConnect = hook
	} else if early {
		cliCfg.BeforeConnect = hook
	}
	addr, accept := p.listen(t, srvCfg)
	type accepted struct {
		c   *hand.Conn
		err error
	}
	srvc := make(chan accepted, 1)
	go func() {
		c, err := accept(ctlContext(t, 20*time.Second), true)
		srvc <- accepted{c, err}
	}()
	ctx := ctlContext(t, 20*time.Second)
	cli, err := p.dial(ctx, addr, cliCfg)
	require.NoError(t, err)
	ctlCloseLater(t, cli)
	a := <-srvc
	require.NoError(t, a.err)
	srv := a.c
	ctlCloseLater(t, srv)
	require.True(t, bytes.HasPrefix(cli.PeerPrivateData(), bcData(cli.LocalAddr())), "accept data %q, want %q", cli.PeerPrivateData(), bcData(cli.LocalAddr()))

	sender, receiver := cli, srv
	if !serverReceives {
		sender, receiver = srv, cli
	}
	// At once: nothing between the connection going live and the sends.
	smr, err := sender.PD().Alloc(bcMsgs*64, hand.AccessLocalWrite)
	require.NoError(t, err)
	ctlCloseLater(t, smr)
	sc, err := hand.NewSendChain(bcMsgs, 1, 0)
	require.NoError(t, err)
	defer sc.Close()
	v := sc.Reserve(bcMsgs)
	for i := range bcMsgs {
		msg := fmt.Sprintf("message %d", i)
		copy(smr.Bytes()[i*64:], msg)
		v.SetSend(i, uint64(i), hand.Signaled, smr.SGE(i*64, len(msg)))
	}
	require.NoError(t, sc.PostSendv(sender))

	if !early {
		time.Sleep(200 * time.Millisecond)
		rmr, err = bcPostRecvs(receiver)
		require.NoError(t, err)
		ctlCloseLater(t, rmr)
		wcs := ctlReap(t, sender.SendCQ(), bcMsgs)
		require.Equal(t, hand.StatusRNRRetryExcErr, wcs[0].Status, "the first send, before any receive: %s", wcStatus(wcs[0].Status))
		t.Logf("receives posted 200 ms after the connection: the first send failed with %s", wcStatus(wcs[0].Status))
		return
	}
	require.Equal(t, 1, hooked, "BeforeConnect calls")
	require.NotNil(t, rmr)
	ctlCloseLater(t, rmr)
	for i, wc := range ctlReap(t, sender.SendCQ(), bcMsgs) {
		require.Equal(t, hand.StatusSuccess, wc.Status, "send %d: %s", wc.WRID, wcStatus(wc.Status))
		require.Equal(t, uint64(i), wc.WRID)
	}
	for i, wc := range ctlReap(t, receiver.RecvCQ(), bcMsgs) {
		require.Equal(t, hand.StatusSuccess, wc.Status, "receive %d: %s", wc.WRID, wcStatus(wc.Status))
		require.Equal(t, uint64(i), wc.WRID)
		require.Equal(t, fmt.Sprintf("message %d", i), string(rmr.Bytes()[i*64:i*64+int(wc.ByteLen)]))
	}
	t.Logf("%d messages sent at once after the connection went live, each received", bcMsgs)
}

// A BeforeConnect that fails ends the attempt with its error and closes the
// Conn it was given (one it kept reads ErrClosed): the client's before any
// request goes out, the server's with the request rejected (the client's
// dial fails with ECONNREFUSED; EPListener.Accept's hook on the EP path).
// The listener then accepts the next connection as usual.
func TestCMBeforeConnectFails(t *testing.T) {
	for _, p := range bcPaths {
		t.Run(p.name, func(t *testing.T) {
			errServer, errClient := errors.New("server hook says no"), errors.New("client hook says no")
			var calls atomic.Int32
			var srvKept *hand.Conn
			cfg := hand.ConnConfig{BeforeConnect: func(c *hand.Conn) error {
				if calls.Add(1) == 1 {
					srvKept = c
					return errServer
				}
				return nil
			}}
			addr, accept := p.listen(t, cfg)
			ctx := ctlContext(t, 20*time.Second)

			var cliKept *hand.Conn
			_, err := p.dial(ctx, addr, hand.ConnConfig{BeforeConnect: func(c *hand.Conn) error {
				cliKept = c
				return errClient
			}})
			require.ErrorIs(t, err, errClient)
			t.Logf("client's hook failed: %v", err)
			require.NotNil(t, cliKept)
			require.ErrorIs(t, cliKept.Disconnect(ctx), hand.ErrClosed, "the Conn the failed hook kept")
			require.NoError(t, cliKept.Close())

			type accepted struct {
				c   *hand.Conn
				err error
			}
			srvc := make(chan accepted, 2)
			go func() {
				for range 2 {
					c, err := accept(ctlContext(t, 20*time.Second), false)
					srvc <- accepted{c, err}
				}
			}()
			_, err = p.dial(ctx, addr, hand.ConnConfig{})
			require.ErrorIs(t, err, syscall.ECONNREFUSED, "the server's hook failed")
			a := <-srvc
			require.ErrorIs(t, a.err, errServer)
			t.Logf("server's hook failed: %v; the client got %v", a.err, err)
			require.NotNil(t, srvKept)
			require.ErrorIs(t, srvKept.WaitDisconnect(ctx), hand.ErrClosed, "the Conn the failed hook kept")

			cli, err := p.dial(ctx, addr, hand.ConnConfig{})
			require.NoError(t, err, "the next dial")
			ctlCloseLater(t, cli)
			a = <-srvc
			require.NoError(t, a.err)
			ctlCloseLater(t, a.c)
			require.Equal(t, int32(2), calls.Load())
		})
	}
}
