package rxe

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/internal/listenwait"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// hand's rdma_cm datagrams (DialUD, ListenUD) against rdma-core's udaddy,
// both ways round, on rxe0. udaddy listens on port 7174 (it has no flag
// for another), sends -C datagrams of -S bytes with its QP number as the
// immediate data, and answers each side's datagrams from one buffer: the
// server sends back, -C times, the first -S bytes of its receive buffer,
// which hold the GRH area and then the start of the last datagram it got.

const (
	udaddyPort  = 7174
	udaddyCount = 10
	udaddySize  = 100 // udaddy's default -S
	// udSlot is the room of one receive: the GRH area and the payload.
	udSlot = hand.GRHSize + udaddySize
)

// udRig is the memory and poller of one UD endpoint: count receive slots
// of udSlot bytes, then count send slots of udaddySize bytes.
type udRig struct {
	mr   *hand.MR
	poll *hand.Poller
	sc   *hand.SendChain
}

func newUDRig(t *testing.T, pd *hand.PD, cq *hand.CQ) *udRig {
	t.Helper()
	mr, err := pd.Alloc(2*udaddyCount*udSlot, hand.AccessLocalWrite)
	require.NoError(t, err)
	p, err := hand.NewPoller(cq, 16)
	require.NoError(t, err)
	sc, err := hand.NewSendChain(udaddyCount, 1, 0)
	require.NoError(t, err)
	return &udRig{mr: mr, poll: p, sc: sc}
}

// close frees the rig; the endpoint's Close needs its MR closed first.
func (r *udRig) close(t *testing.T) {
	t.Helper()
	r.sc.Close()
	r.poll.Close()
	require.NoError(t, r.mr.Close())
}

// postRecvs posts udaddyCount receives, wr_id i into slot i.
func (r *udRig) postRecvs(qp *hand.QP) error {
	c, err := hand.NewRecvChain(udaddyCount, 1)
	if err != nil {
		return err
	}
	defer c.Close()
	w := c.Reserve(udaddyCount)
	for i := range udaddyCount {
		w.Set(i, uint64(i), r.mr.SGE(i*udSlot, udSlot))
	}
	return c.PostRecv(qp)
}

func (r *udRig) sendBuf(i int) []byte {
	at := udaddyCount*udSlot + i*udaddySize
	return r.mr.Bytes()[at : at+udaddySize]
}

// reap waits for n receive and m send completions, each of which must have
// succeeded, and returns the receives.
func (r *udRig) reap(t *testing.T, ctx context.Context, n, m int) []hand.WC {
	t.Helper()
	var recvs []hand.WC
	sends := 0
	for len(recvs) < n || sends < m {
		wcs, err := r.poll.Wait(ctx)
		require.NoError(t, err, "after %d of %d receives and %d of %d sends", len(recvs), n, sends, m)
		for _, w := range wcs {
			require.True(t, w.OK(), "wr %d: %s", w.WRID(), w.StatusString())
			if w.IsRecv() {
				recvs = append(recvs, w)
			} else {
				sends++
			}
		}
	}
	require.Len(t, recvs, n, "receives")
	require.Equal(t, m, sends, "send completions")
	return recvs
}

// udMessage is the i-th datagram the Go side sends: a text, then a pattern
// to udaddySize bytes.
func udMessage(i int) []byte {
	b := make([]byte, udaddySize)
	for k := range b {
		b[k] = byte(i*7 + k)
	}
	copy(b, fmt.Sprintf("goverbs datagram %02d", i))
	return b
}

func checkUdaddy(t *testing.T, r tooltest.Run) {
	t.Helper()
	t.Logf("%s:\n%s", r.Name, r.Out)
	require.False(t, r.Failed(), "%s: exit %d %s", r.Name, r.ExitCode, r.Err)
	require.Contains(t, r.Out, "data transfers complete")
	require.Contains(t, r.Out, "return status 0")
}

func TestInteropUDGoClientCServer(t *testing.T) {
	RequireDevice(t)
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	c := tooltest.StartC(t, ctx, "C server", "udaddy", "-b", localAddr(), "-C", fmt.Sprint(udaddyCount))
	if err := listenwait.CM(ctx, udaddyPort); err != nil {
		t.Fatalf("udaddy server: %v; output:\n%s", err, c.Wait().Out)
	}
	var r *udRig
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	conn, err := hand.DialUD(dctx, netip.AddrPortFrom(netip.MustParseAddr(localAddr()), udaddyPort).String(), hand.UDConfig{
		Caps: hand.QPCaps{MaxSendWR: udaddyCount, MaxRecvWR: udaddyCount},
		BeforeConnect: func(c *hand.UDConn) error {
			r = newUDRig(t, c.PD(), c.RecvCQ())
			return r.postRecvs(c.QP())
		},
	})
	require.NoError(t, err)
	defer func() {
		r.close(t)
		require.NoError(t, conn.Close())
	}()
	require.NotNil(t, conn.AH())
	require.NotZero(t, conn.RemoteQPN(), "the server's QPN from the SIDR answer")
	require.Equal(t, hand.UDPQKey, conn.RemoteQKey(), "RDMA_UDP_QKEY")
	t.Logf("udaddy's QP %d, Q_Key %#x; ours %d", conn.RemoteQPN(), conn.RemoteQKey(), conn.QP().Num())

	// udaddy answers to the QPN in the immediate data.
	w := r.sc.Reserve(udaddyCount)
	for i := range udaddyCount {
		copy(r.sendBuf(i), udMessage(i))
		w.SetUDImm(i, uint64(100+i), hand.Signaled, conn.QP().Num(),
			r.mr.SGE(udaddyCount*udSlot+i*udaddySize, udaddySize), conn.AH(), conn.RemoteQPN(), conn.RemoteQKey())
	}
	require.NoError(t, r.sc.PostSend(conn.QP()))
	recvs := r.reap(t, ctx, udaddyCount, udaddyCount)
	last := udMessage(udaddyCount - 1)
	for _, wc := range recvs {
		i := int(wc.WRID())
		_, payload, err := hand.SplitUD(r.mr.Bytes()[i*udSlot:(i+1)*udSlot], &wc)
		require.NoError(t, err)
		require.Len(t, payload, udaddySize)
		require.Equal(t, conn.RemoteQPN(), wc.SrcQP(), "the answer came from udaddy's QP")
		imm, ok := wc.Imm()
		require.True(t, ok, "udaddy sends its QPN as immediate data")
		require.Equal(t, conn.RemoteQPN(), imm)
		// udaddy's buffer: its GRH area, then the last datagram it got.
		require.Equal(t, last[:udaddySize-hand.GRHSize], payload[hand.GRHSize:],
			"udaddy sent back the start of our last datagram")
	}
	checkUdaddy(t, c.Wait())
}

func TestInteropUDCClientGoServer(t *testing.T) {
	RequireDevice(t)
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	l, err := hand.ListenUD(ctx, netip.AddrPortFrom(netip.MustParseAddr(localAddr()), udaddyPort).String())
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, udaddyPort, int(l.Addr().Port()))
	c := tooltest.StartC(t, ctx, "C client", "udaddy", "-s", localAddr(), "-C", fmt.Sprint(udaddyCount))

	req, err := l.Accept(ctx)
	require.NoError(t, err)
	require.Equal(t, localAddr(), req.RemoteAddr().Addr().String())
	var r *udRig
	conn, err := req.Accept(ctx, hand.UDConfig{
		Caps: hand.QPCaps{MaxSendWR: udaddyCount, MaxRecvWR: udaddyCount},
		BeforeConnect: func(c *hand.UDConn) error {
			r = newUDRig(t, c.PD(), c.RecvCQ())
			return r.postRecvs(c.QP())
		},
	})
	require.NoError(t, err)
	require.Nil(t, conn.AH(), "the accepting side answers through NewAHFromWC")

	recvs := r.reap(t, ctx, udaddyCount, 0)
	var replies []*hand.AH
	w := r.sc.Reserve(udaddyCount)
	for k, wc := range recvs {
		i := int(wc.WRID())
		grh, payload, err := hand.SplitUD(r.mr.Bytes()[i*udSlot:(i+1)*udSlot], &wc)
		require.NoError(t, err)
		require.Len(t, payload, udaddySize)
		require.NotNil(t, grh, "a RoCE datagram carries a GRH")
		src, err := hand.GRHSource(grh)
		require.NoError(t, err)
		require.Equal(t, localAddr(), src.String())
		imm, ok := wc.Imm()
		require.True(t, ok, "udaddy sends its QPN as immediate data")
		require.Equal(t, wc.SrcQP(), imm, "udaddy's immediate data is its QPN")
		ah, err := conn.PD().NewAHFromWC(&wc, grh, conn.Port())
		require.NoError(t, err)
		replies = append(replies, ah)
		msg := udMessage(k)
		copy(r.sendBuf(k), msg)
		w.SetUD(k, uint64(100+k), hand.Signaled, r.mr.SGE(udaddyCount*udSlot+k*udaddySize, udaddySize), ah, wc.SrcQP(), hand.UDPQKey)
	}
	require.NoError(t, r.sc.PostSend(conn.QP()))
	r.reap(t, ctx, 0, udaddyCount)
	checkUdaddy(t, c.Wait())

	// The UDConn refuses to close while AHs on its own PD are open.
	r.close(t)
	var busy *hand.BusyError
	require.ErrorAs(t, conn.Close(), &busy)
	for _, ah := range replies {
		require.NoError(t, ah.Close())
	}
	require.NoError(t, conn.Close())
}

// Two hand sides: DialUD against ListenUD, with private data both ways,
// and a request rejected.
func TestCMUDGoGo(t *testing.T) {
	RequireDevice(t)
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	l, err := hand.ListenUD(ctx, localAddr()+":0")
	require.NoError(t, err)
	defer l.Close()
	addr := l.Addr().String()

	type result struct {
		conn *hand.UDConn
		err  error
	}
	dialed := make(chan result, 1)
	go func() {
		c, err := hand.DialUD(ctx, addr, hand.UDConfig{PrivateData: []byte("hello, listener")})
		dialed <- result{c, err}
	}()
	req, err := l.Accept(ctx)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(req.PrivateData(), []byte("hello, listener")), "request data %q", req.PrivateData())
	srv, err := req.Accept(ctx, hand.UDConfig{PrivateData: []byte("hello, dialler")})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Close()) }()
	res := <-dialed
	require.NoError(t, res.err)
	cli := res.conn
	defer func() { require.NoError(t, cli.Close()) }()
	require.Equal(t, srv.QP().Num(), cli.RemoteQPN())
	require.True(t, bytes.HasPrefix(cli.PeerPrivateData(), []byte("hello, dialler")), "answer data %q", cli.PeerPrivateData())

	go func() {
		_, err := hand.DialUD(ctx, addr, hand.UDConfig{})
		dialed <- result{nil, err}
	}()
	req, err = l.Accept(ctx)
	require.NoError(t, err)
	require.NoError(t, req.Reject([]byte("no")))
	res = <-dialed
	require.Error(t, res.err)
	var ce *hand.CMEventError
	require.ErrorAs(t, res.err, &ce)
	t.Logf("rejected: %v", res.err)
	// A SIDR reject is an UNREACHABLE event with the SIDR status.
	require.Equal(t, rdmacm.CMEventUnreachable, ce.Event)
	require.ErrorIs(t, res.err, syscall.EHOSTUNREACH)
	require.True(t, strings.Contains(res.err.Error(), "dial UD"), "%v", res.err)
}
