package rxe

import (
	"context"
	"fmt"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// Helpers of the control-path tests (control_*_test.go): they drive the
// hand/ control path on the VM's rxe device.

// ctlDevice opens the VM's device and returns it with its RoCE v2 IPv4 GID
// index; both are closed (and must close cleanly) when the test ends.
func ctlDevice(t *testing.T) (*hand.Context, int) {
	t.Helper()
	name, gidIndex := RequireDevice(t)
	ctx, err := hand.Open(name)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ctx.Close(), "closing the Context at the end of the test") })
	return ctx, gidIndex
}

// ctlAddr is the IPv4 address the VM gave the device's interface.
func ctlAddr(t *testing.T) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(os.Getenv("RXE_ADDR"))
	require.NoError(t, err, "RXE_ADDR=%q: run under internal/cmd/rxevm, which sets it", os.Getenv("RXE_ADDR"))
	return a
}

// ctlCloseLater closes c when the test ends, in reverse order of registration
// (children registered after parents close first), and fails on error.
func ctlCloseLater(t *testing.T, c interface{ Close() error }) {
	t.Helper()
	testkit.CloseLater(t, fmt.Sprintf("%T", c), c)
}

// cmShared makes, on librdmacm's context of the device, what a program
// shares across its rdma_cm connections: a PD, a CQ of 64 and an 8 KiB MR
// open to remote reads and writes, all closed when the test ends; name is
// the device's.
func cmShared(t *testing.T) (name string, pd *hand.PD, cq *hand.CQ, mr *hand.MR) {
	t.Helper()
	name, _ = RequireDevice(t)
	cmctx, err := hand.CMContext(name)
	require.NoError(t, err)
	ctlCloseLater(t, cmctx)
	pd, err = cmctx.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, pd)
	cq, err = cmctx.NewCQ(64, hand.CQOptions{})
	require.NoError(t, err)
	ctlCloseLater(t, cq)
	mr, err = pd.Alloc(8192, hand.AccessLocalWrite|hand.AccessRemoteRead|hand.AccessRemoteWrite)
	require.NoError(t, err)
	ctlCloseLater(t, mr)
	return name, pd, cq, mr
}

// ctlRig is a PD, a CQ (with a completion channel) and an MR on the device.
type ctlRig struct {
	ctx      *hand.Context
	gidIndex int
	gid      hand.GID
	pd       *hand.PD
	ch       *hand.CompChannel
	cq       *hand.CQ
	mr       *hand.MR
}

func newCtlRig(t *testing.T) *ctlRig {
	t.Helper()
	ctx, gidIndex := ctlDevice(t)
	return newCtlRigOn(t, ctx, gidIndex)
}

// newCtlRigOn is newCtlRig on ctx, whose GID gidIndex is the RoCE v2 one.
func newCtlRigOn(t *testing.T, ctx *hand.Context, gidIndex int) *ctlRig {
	t.Helper()
	r := &ctlRig{ctx: ctx, gidIndex: gidIndex}
	e, err := ctx.RoCEv2IPv4GID(1)
	require.NoError(t, err)
	r.gid = e.GID
	r.pd, err = ctx.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, r.pd)
	r.ch, err = ctx.NewCompChannel()
	require.NoError(t, err)
	ctlCloseLater(t, r.ch)
	r.cq, err = ctx.NewCQ(256, hand.CQOptions{Channel: r.ch})
	require.NoError(t, err)
	ctlCloseLater(t, r.cq)
	r.mr, err = r.pd.Alloc(1<<16, hand.AccessLocalWrite|hand.AccessRemoteWrite|hand.AccessRemoteRead|hand.AccessMWBind)
	require.NoError(t, err)
	ctlCloseLater(t, r.mr)
	return r
}

func (r *ctlRig) qp(t *testing.T, typ hand.QPType) *hand.QP {
	t.Helper()
	return r.qpOn(t, typ, r.cq)
}

// qpOn makes a QP of typ on the rig's PD whose sends and receives complete
// on cq.
func (r *ctlRig) qpOn(t *testing.T, typ hand.QPType, cq *hand.CQ) *hand.QP {
	t.Helper()
	qp, err := r.pd.NewQP(hand.QPConfig{Type: typ, SendCQ: cq, Caps: hand.QPCaps{MaxSendWR: 64, MaxRecvWR: 1024, MaxInlineData: 64}})
	require.NoError(t, err)
	ctlCloseLater(t, qp)
	return qp
}

func (r *ctlRig) endpoint(qp *hand.QP, psn uint32) hand.Endpoint {
	return hand.Endpoint{QPN: qp.Num(), PSN: psn, GID: r.gid}
}

// pair makes two QPs of typ on the rig and connects them to each other the
// way two hosts would: each side's Endpoint, marshalled, goes to the other.
func (r *ctlRig) pair(t *testing.T, typ hand.QPType) (a, b *hand.QP) {
	t.Helper()
	a, b = r.qp(t, typ), r.qp(t, typ)
	pa, pb := hand.RandomPSN(), hand.RandomPSN()
	ea, eb := r.exchange(t, r.endpoint(a, pa)), r.exchange(t, r.endpoint(b, pb))
	access := hand.AccessLocalWrite | hand.AccessRemoteWrite
	if typ == hand.RC {
		access |= hand.AccessRemoteRead | hand.AccessRemoteAtomic
	}
	require.NoError(t, a.Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: access, PSN: pa, Remote: eb}))
	require.NoError(t, b.Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: access, PSN: pb, Remote: ea}))
	return a, b
}

// exchange is the side channel: marshal and unmarshal.
func (r *ctlRig) exchange(t *testing.T, e hand.Endpoint) hand.Endpoint {
	t.Helper()
	b, err := e.MarshalBinary()
	require.NoError(t, err)
	var got hand.Endpoint
	require.NoError(t, got.UnmarshalBinary(b))
	require.Equal(t, e, got)
	return got
}

// ctlPostRecv posts receives of size bytes at offset (wrIDs first, first+1...).
func ctlPostRecv(t *testing.T, qp *hand.QP, mr *hand.MR, first uint64, n, offset, size int) {
	t.Helper()
	ctlPostRecvSlots(t, qp, mr, first, n, offset, size, 0)
}

// ctlPostRecvSlots is ctlPostRecv with receive i at offset+i*stride.
func ctlPostRecvSlots(t *testing.T, qp *hand.QP, mr *hand.MR, first uint64, n, offset, size, stride int) {
	t.Helper()
	c, err := hand.NewRecvChain(n, 1)
	require.NoError(t, err)
	defer c.Close()
	w := c.Reserve(n)
	for i := range n {
		w.Set(i, first+uint64(i), mr.SGE(offset+i*stride, size))
	}
	require.NoError(t, c.PostRecv(qp))
}

// ctlPostSend posts one signaled send of size bytes at offset.
func ctlPostSend(t *testing.T, qp *hand.QP, mr *hand.MR, wrID uint64, offset, size int) {
	t.Helper()
	c, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	c.Reserve(1).SetSend(0, wrID, hand.Signaled, mr.SGE(offset, size))
	require.NoError(t, c.PostSend(qp))
}

// ctlReap polls cq until it has n completions or the deadline passes.
func ctlReap(t *testing.T, cq *hand.CQ, n int) []verbs.WC {
	t.Helper()
	var out []verbs.WC
	wc := make([]verbs.WC, 16)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		k, err := cq.Poll(wc[:min(len(wc), n-len(out))])
		require.NoError(t, err)
		out = append(out, wc[:k]...)
		if k == 0 {
			require.True(t, time.Now().Before(deadline), "%d of %d completions after 10 s", len(out), n)
			time.Sleep(100 * time.Microsecond)
		}
	}
	return out
}

// ctlContext is a context that ends with the test or after d.
func ctlContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
