package rxe

// Clients and servers that stop halfway through rdma_cm's handshake.

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/hand"
)

// stallingClient sends a connection request to addr from an id with no QP
// (qp_num given in the parameters), as a client whose host then goes
// silent would: when the server accepts, the client's rdma_cm reports
// CONNECT_RESPONSE and waits for rdma_establish to send the RTU, which
// never comes, so the server's id stays accepted but not established.
func stallingClient(t *testing.T, addr netip.AddrPort) {
	t.Helper()
	_, id := cmResolved(t, addr)
	param := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7, QPNum: 0x4242}
	cmCall(t, "rdma_connect", rdmacm.Connect(id, &param))
}

// An Accept whose client never completes the handshake returns when its
// context ends, and a Close of the Conn meanwhile returns at once: on the
// rdma_create_ep path both took 69 s, rdma_destroy_id waiting for the
// kernel to let go of an id that rdma_reject or rdma_disconnect had moved
// on from "accepted" (see hand's Conn.accepting). The listener then
// accepts the next client. ConnRequest.Accept, which destroyed the id
// without rejecting it first, returned in time already; it is here so that
// it stays so.
func TestAcceptStalledClient(t *testing.T) {
	timed := func(t *testing.T, what string, f func() error) error {
		start := time.Now()
		err := f()
		took := time.Since(start)
		t.Logf("%s returned after %v: %v", what, took, err)
		require.Less(t, took, 5*time.Second, what)
		return err
	}
	t.Run("EPRequest", func(t *testing.T) {
		l := cmepListen(t, hand.ConnConfig{})
		stallingClient(t, l.Addr())
		req, err := l.GetRequest(ctlContext(t, 20*time.Second))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = timed(t, "Accept", func() error { _, err := req.Accept(ctx); return err })
		require.ErrorIs(t, err, context.DeadlineExceeded)

		// A Close while Accept waits ends it, and returns at once too.
		stallingClient(t, l.Addr())
		req, err = l.GetRequest(ctlContext(t, 20*time.Second))
		require.NoError(t, err)
		accepted := make(chan error, 1)
		go acceptWaits(ctlContext(t, 20*time.Second), req, accepted)
		waitGoroutine(t, "acceptWaits", "select") // rdma_accept sent, ESTABLISHED awaited in its mailbox
		require.NoError(t, timed(t, "Conn.Close", req.Conn().Close))
		require.ErrorIs(t, <-accepted, hand.ErrClosed)

		cli := make(chan error, 1)
		go func() {
			c, err := hand.DialEP(ctlContext(t, 20*time.Second), l.Addr().String(), hand.ConnConfig{})
			if err == nil {
				err = c.Close()
			}
			cli <- err
		}()
		c, err := l.Accept(ctlContext(t, 20*time.Second))
		require.NoError(t, err, "the next client")
		require.NoError(t, <-cli)
		require.NoError(t, c.Close())
	})
	t.Run("ConnRequest", func(t *testing.T) {
		l := ctlListen(t)
		stallingClient(t, l.Addr())
		req, err := l.Accept(ctlContext(t, 20*time.Second))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = timed(t, "Accept", func() error { _, err := req.Accept(ctx, hand.ConnConfig{}); return err })
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// acceptWaits accepts req and sends Accept's error to out: a function of
// its own, for waitGoroutine to find it waiting.
func acceptWaits(ctx context.Context, req *hand.EPRequest, out chan<- error) {
	_, err := req.Accept(ctx)
	out <- err
}

// silentListener listens on the VM's address through a raw rdma_cm id and
// never reads its channel: a connection request to it is neither accepted
// nor rejected, as a server that hangs would leave it.
func silentListener(t *testing.T) netip.AddrPort {
	t.Helper()
	ch := cmChannel(t)
	lid := cmID(t, ch)
	bind := sockaddrIn(netip.AddrPortFrom(ctlAddr(t), 0))
	cmCall(t, "rdma_bind_addr", rdmacm.BindAddr(lid, &bind))
	cmCall(t, "rdma_listen", rdmacm.Listen(lid, 4))
	return netip.AddrPortFrom(ctlAddr(t), rdmacm.GetSrcPort(lid).Native())
}

// A Dial or DialEP whose server never answers returns when its context
// ends (it did before; the client's id, never accepted, is let go at once).
func TestDialStalledServer(t *testing.T) {
	RequireDevice(t)
	addr := silentListener(t)
	for _, c := range []struct {
		name string
		dial func(context.Context) (*hand.Conn, error)
	}{
		{"Dial", func(ctx context.Context) (*hand.Conn, error) { return hand.Dial(ctx, addr.String(), hand.ConnConfig{}) }},
		{"DialEP", func(ctx context.Context) (*hand.Conn, error) {
			return hand.DialEP(ctx, addr.String(), hand.ConnConfig{})
		}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		_, err := c.dial(ctx)
		took := time.Since(start)
		cancel()
		t.Logf("%s returned after %v: %v", c.name, took, err)
		require.ErrorIs(t, err, context.DeadlineExceeded, c.name)
		require.Less(t, took, 5*time.Second, c.name)
	}
}
