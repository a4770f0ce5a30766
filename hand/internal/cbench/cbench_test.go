package cbench_test

import (
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand/internal/cbench"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// These tests check the fake provider through the C reference loops, which
// call the real static inlines of verbs.h and rdma_verbs.h.

type rig struct {
	p   *fakeprov.Provider
	cq  *fakeprov.CQ
	qp  *fakeprov.QP
	srq *fakeprov.SRQ
}

func newRig(t testing.TB, typ, depth, cqe int) *rig {
	t.Helper()
	p, err := fakeprov.New()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	cq, err := p.NewCQ(cqe)
	require.NoError(t, err)
	qp, err := p.NewQP(fakeprov.QPAttr{Type: typ, SendCQ: cq, RecvCQ: cq, MaxSendWR: depth,
		MaxRecvWR: depth, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInline: 64})
	require.NoError(t, err)
	srq, err := p.NewSRQ(cq, depth, 2)
	require.NoError(t, err)
	return &rig{p: p, cq: cq, qp: qp, srq: srq}
}

func TestPostRecvWritesWQEsAndCompletes(t *testing.T) {
	r := newRig(t, fakeprov.RC, 64, 64)
	require.NoError(t, cbench.PostRecv(r.qp.Ptr(), 8, 1))

	st := r.qp.RecvStats()
	require.Equal(t, uint64(8), st.Posted)
	require.Equal(t, uint64(1), st.Doorbells)
	require.Equal(t, uint32(8), st.Doorbell)
	require.Equal(t, 8, r.cq.Pending())

	wqe := r.qp.RecvWQE(3)
	require.Equal(t, uint32(cbench.Len), binary.BigEndian.Uint32(wqe[0:]))
	require.Equal(t, uint32(cbench.LKey), binary.BigEndian.Uint32(wqe[4:]))
	require.Equal(t, uint64(cbench.Addr+3*cbench.Len), binary.BigEndian.Uint64(wqe[8:]))
	require.Equal(t, uint32(0x100), binary.BigEndian.Uint32(wqe[20:]), "terminator segment")

	require.NoError(t, cbench.Poll(r.cq.Ptr(), 8, 1))
	require.Equal(t, 0, r.cq.Pending())
	st = r.qp.RecvStats()
	require.Equal(t, st.Head, st.Tail, "polling releases the WQ slots")
	require.Equal(t, uint32(8), r.cq.Stats().Doorbell)
	require.ErrorIs(t, cbench.Poll(r.cq.Ptr(), 1, 1), syscall.EAGAIN, "empty CQ")
}

func TestPostFailsAtArmedIndex(t *testing.T) {
	r := newRig(t, fakeprov.RC, 64, 64)
	r.qp.FailRecv(3, syscall.EAGAIN)
	require.ErrorIs(t, cbench.PostRecv(r.qp.Ptr(), 8, 1), syscall.EAGAIN)
	st := r.qp.RecvStats()
	require.Equal(t, uint64(3), st.Posted)
	require.Equal(t, uint64(1), st.Failed)
	require.NoError(t, cbench.PostRecv(r.qp.Ptr(), 8, 1), "the failure fires once")
}

func TestWQFullIsENOMEM(t *testing.T) {
	r := newRig(t, fakeprov.RC, 16, 64)
	require.ErrorIs(t, cbench.PostRecv(r.qp.Ptr(), 32, 1), syscall.ENOMEM)
	require.Equal(t, uint64(16), r.qp.RecvStats().Posted)
}

func TestSinkNeverFills(t *testing.T) {
	r := newRig(t, fakeprov.RC, 16, 16)
	r.qp.SetRecvMode(fakeprov.Sink)
	r.qp.SetSendMode(fakeprov.Sink)
	r.srq.SetMode(fakeprov.Sink)
	require.NoError(t, cbench.PostRecv(r.qp.Ptr(), 8, 100))
	require.NoError(t, cbench.PostSRQRecv(r.srq.Ptr(), 8, 100))
	require.NoError(t, cbench.PostSend(r.qp.Ptr(), cbench.CAS, nil, 4, 100))
	require.Equal(t, 0, r.cq.Pending())
	require.False(t, r.cq.Overrun())
}

func TestSendKinds(t *testing.T) {
	for _, kind := range []cbench.SendKind{cbench.Send, cbench.SendImm, cbench.Write,
		cbench.WriteImm, cbench.Read, cbench.CAS, cbench.FAA, cbench.Inline} {
		r := newRig(t, fakeprov.RC, 64, 64)
		require.NoError(t, cbench.PostSend(r.qp.Ptr(), kind, nil, 4, 1), "kind %d", kind)
		require.Equal(t, 4, r.cq.Pending(), "kind %d", kind)
		require.NoError(t, cbench.Poll(r.cq.Ptr(), 4, 1))
	}
	r := newRig(t, fakeprov.UD, 64, 64)
	ah, err := r.p.NewAH()
	require.NoError(t, err)
	require.NoError(t, cbench.PostSend(r.qp.Ptr(), cbench.UD, ah, 4, 1))
	wqe := r.qp.SendWQE(0)
	require.Equal(t, uint32(cbench.RemoteQPN)|1<<31, binary.BigEndian.Uint32(wqe[24:]))
	require.Equal(t, uint32(cbench.QKey), binary.BigEndian.Uint32(wqe[28:]))
	require.ErrorIs(t, cbench.PostSend(r.qp.Ptr(), cbench.Write, nil, 1, 1), syscall.EINVAL,
		"UD QPs take sends only")
}

func TestInlineCopiesData(t *testing.T) {
	r := newRig(t, fakeprov.RC, 64, 64)
	require.NoError(t, cbench.PostSend(r.qp.Ptr(), cbench.Inline, nil, 1, 1))
	wqe := r.qp.SendWQE(0)
	require.Equal(t, uint32(cbench.InlineLen)|0x80000000, binary.BigEndian.Uint32(wqe[16:]))
	require.Equal(t, cbench.InlineData, string(wqe[20:20+cbench.InlineLen]))
}

func TestRDMAPostv(t *testing.T) {
	for _, kind := range []cbench.RDMAKind{cbench.Recvv, cbench.Sendv, cbench.Readv, cbench.Writev} {
		r := newRig(t, fakeprov.RC, 64, 64)
		id, err := r.p.NewCMID(r.qp, nil)
		require.NoError(t, err)
		require.NoError(t, cbench.RDMAPost(id, kind, 4, 2), "kind %d", kind)
		require.Equal(t, 8, r.cq.Pending())
	}
	r := newRig(t, fakeprov.RC, 64, 64)
	id, err := r.p.NewCMID(r.qp, r.srq)
	require.NoError(t, err)
	require.NoError(t, cbench.RDMAPost(id, cbench.Recvv, 4, 1))
	require.Equal(t, uint64(4), r.srq.Stats().Posted, "rdma_post_recvv prefers the SRQ")
	r.srq.FailRecv(0, syscall.EBUSY)
	require.ErrorIs(t, cbench.RDMAPost(id, cbench.Recvv, 1, 1), syscall.EBUSY)
}

func TestEndlessPolling(t *testing.T) {
	r := newRig(t, fakeprov.RC, 64, 64)
	require.NoError(t, cbench.PostRecv(r.qp.Ptr(), 16, 1))
	require.NoError(t, r.cq.SetEndless(true))
	require.NoError(t, cbench.Poll(r.cq.Ptr(), 16, 1000))
	require.Equal(t, 16, r.cq.Pending())
	require.NoError(t, r.cq.SetEndless(false))
	require.Equal(t, 0, r.cq.Pending())
}

func TestOverrunAndInjection(t *testing.T) {
	r := newRig(t, fakeprov.RC, 64, 4)
	r.cq.InjectStatus(2, 5, 0x77)
	require.NoError(t, cbench.PostRecv(r.qp.Ptr(), 8, 1))
	require.True(t, r.cq.Overrun())
	require.Equal(t, uint64(4), r.cq.Stats().Dropped)
	require.Equal(t, 4, r.cq.Pending())
	require.NoError(t, cbench.Poll(r.cq.Ptr(), 4, 1))
	require.Equal(t, uint64(4), r.cq.Stats().Polled)
}

func TestEmptyCall(t *testing.T) {
	cbench.Empty()
}

// The cost of a crossing by its arguments (go test -bench Cgo ./hand/internal/cbench):
// none, three pointers (which cgo checks for Go pointers one by one) and
// four uintptr_t (which it does not).
func BenchmarkCgoEmpty(b *testing.B) {
	for range b.N {
		cbench.Empty()
	}
}

func BenchmarkCgoPtr3(b *testing.B) {
	r := newRig(b, fakeprov.RC, 16, 16)
	p := r.qp.Ptr()
	for range b.N {
		cbench.EmptyPtr3(p, p, p)
	}
}

func BenchmarkCgoUintptr4(b *testing.B) {
	r := newRig(b, fakeprov.RC, 16, 16)
	p := uintptr(r.qp.Ptr())
	for range b.N {
		cbench.EmptyUintptr4(p, p, p, p)
	}
}
