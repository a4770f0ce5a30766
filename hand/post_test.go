package hand_test

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// got is a completion copied out of a poller's buffer.
type got struct {
	wrID    uint64
	status  verbs.WCStatus
	opcode  verbs.WCOpcode
	byteLen uint32
	qpNum   uint32
}

// drain polls until want completions came back, and checks the CQ is then empty.
func drain(t *testing.T, r *rig, want int) []got {
	t.Helper()
	p, err := hand.NewPoller(r.vcq, 64)
	require.NoError(t, err)
	defer p.Free()
	var out []got
	for len(out) < want {
		wcs, err := p.Poll()
		require.NoError(t, err)
		require.NotEmpty(t, wcs, "CQ ran dry after %d of %d completions", len(out), want)
		for i := range wcs {
			w := &wcs[i]
			out = append(out, got{w.WRID(), w.Status(), w.Opcode(), w.ByteLen(), w.QPNum()})
		}
	}
	wcs, err := p.Poll()
	require.NoError(t, err)
	require.Empty(t, wcs, "more completions than WRs")
	return out
}

func requireIDs(t *testing.T, cs []got, first, n int) {
	t.Helper()
	require.Len(t, cs, n)
	for i, c := range cs {
		require.Equal(t, uint64(first+i), c.wrID, "completion %d", i)
		require.Equal(t, verbs.WCSuccess, c.status, "completion %d", i)
	}
}

func TestRecvChainEveryLength(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewRecvChain(1024, 1)
	require.NoError(t, err)
	defer c.Free()
	next := 0
	for n := 1; n <= 1024; n++ {
		for i := 0; i < n; i++ {
			require.True(t, c.Add(uint64(next+i), sge(i)))
		}
		require.Equal(t, n, c.Len())
		require.NoError(t, c.PostRecv(r.qp))
		require.Zero(t, c.Len(), "a full post empties the chain")
		cs := drain(t, r, n)
		requireIDs(t, cs, next, n)
		for _, g := range cs {
			require.Equal(t, verbs.WCRecv, g.opcode)
			require.Equal(t, uint32(64), g.byteLen)
			require.Equal(t, r.fqp.Num(), g.qpNum)
		}
		next += n
	}
	st := r.fqp.RecvStats()
	require.Equal(t, uint64(next), st.Posted)
	require.Equal(t, uint64(1024), st.Doorbells, "one doorbell per post call")
}

func TestRecvChainWQEContents(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewRecvChain(4, 3)
	require.NoError(t, err)
	defer c.Free()
	require.True(t, c.Add(7, sge(0)))
	require.True(t, c.AppendSGE(sge(1)))
	require.True(t, c.AppendSGE(sge(2)))
	require.False(t, c.AppendSGE(sge(3)), "maxSGE is 3")
	require.NoError(t, c.PostRecv(r.qp))
	wqe := r.fqp.RecvWQE(0)
	for k := 0; k < 3; k++ {
		s := sge(k)
		require.Equal(t, s.Length, binary.BigEndian.Uint32(wqe[16*k:]))
		require.Equal(t, s.Lkey, binary.BigEndian.Uint32(wqe[16*k+4:]))
		require.Equal(t, s.Addr, binary.BigEndian.Uint64(wqe[16*k+8:]))
	}
	cs := drain(t, r, 1)
	require.Equal(t, uint32(3*64), cs[0].byteLen)
}

func TestRecvChainFull(t *testing.T) {
	c, err := hand.NewRecvChain(2, 1)
	require.NoError(t, err)
	defer c.Free()
	require.True(t, c.Add(1, sge(0)))
	require.True(t, c.Add(2, sge(1)))
	require.False(t, c.Add(3, sge(2)))
	require.Equal(t, 2, c.Len())
	require.False(t, (&hand.RecvChain{}).AppendSGE(sge(0)), "no WR to append to")
}

func TestSRQChain(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewRecvChain(1024, 1)
	require.NoError(t, err)
	defer c.Free()
	next := 0
	for _, n := range []int{1, 2, 7, 64, 1000, 1024} {
		for i := 0; i < n; i++ {
			require.True(t, c.Add(uint64(next+i), sge(i)))
		}
		require.NoError(t, c.PostSRQRecv(r.srq))
		requireIDs(t, drain(t, r, n), next, n)
		next += n
	}
	require.Equal(t, uint64(next), r.fsrq.Stats().Posted)
}

// failCase is one post entry point driven through its fake failure knob.
type failCase struct {
	name string
	arm  func(r *rig, k int, e syscall.Errno)
	add  func(i int) bool
	post func() error
	len  func() int
	skip func()
}

func failCases(t *testing.T, r *rig) []failCase {
	rc, err := hand.NewRecvChain(64, 1)
	require.NoError(t, err)
	t.Cleanup(rc.Free)
	sc, err := hand.NewSendChain(64, 1, 0)
	require.NoError(t, err)
	t.Cleanup(sc.Free)
	id := r.cmID(t, false)
	idSRQ := r.cmID(t, true)
	recvAdd := func(i int) bool { return rc.Add(uint64(i), sge(i)) }
	writeAdd := func(i int) bool {
		return sc.AddWrite(uint64(i), verbs.SendSignaled, sge(i), 0x200000, 0x5678)
	}
	return []failCase{
		{"ibv_post_recv", func(r *rig, k int, e syscall.Errno) { r.fqp.FailRecv(k, e) },
			recvAdd, func() error { return rc.PostRecv(r.qp) }, rc.Len, rc.Skip},
		{"ibv_post_srq_recv", func(r *rig, k int, e syscall.Errno) { r.fsrq.FailRecv(k, e) },
			recvAdd, func() error { return rc.PostSRQRecv(r.srq) }, rc.Len, rc.Skip},
		{"ibv_post_send", func(r *rig, k int, e syscall.Errno) { r.fqp.FailSend(k, e) },
			writeAdd, func() error { return sc.PostSend(r.qp) }, sc.Len, sc.Skip},
		// rdma_post_*v post one WR per call: the k-th call fails at its WR 0.
		{"rdma_post_recvv", func(r *rig, k int, e syscall.Errno) { r.fqp.FailRecv(0, e) },
			recvAdd, func() error { return rc.PostRecvv(id) }, rc.Len, rc.Skip},
		{"rdma_post_recvv", func(r *rig, k int, e syscall.Errno) { r.fsrq.FailRecv(0, e) },
			recvAdd, func() error { return rc.PostRecvv(idSRQ) }, rc.Len, rc.Skip},
		{"rdma_post_writev", func(r *rig, k int, e syscall.Errno) { r.fqp.FailSend(0, e) },
			writeAdd, func() error { return sc.PostWritev(id) }, sc.Len, sc.Skip},
	}
}

func TestMidChainFailureKeepsTheRest(t *testing.T) {
	const n, k = 8, 3
	for _, fc := range failCases(t, newRig(t, rigOpts{})) {
		t.Run(fc.name, func(t *testing.T) {
			r := newRig(t, rigOpts{})
			fc = failCases(t, r)[indexOf(t, fc.name, fc)]
			for i := 0; i < n; i++ {
				require.True(t, fc.add(i))
			}
			if fc.name == "rdma_post_recvv" || fc.name == "rdma_post_writev" {
				// one call per WR: post k of them, then arm the next call
				require.NoError(t, postFirst(fc, r, k, n))
			} else {
				fc.arm(r, k, syscall.EAGAIN)
			}
			err := fc.post()
			var pe *hand.PostError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, fc.name, pe.Op)
			require.Equal(t, k, pe.Index)
			require.Equal(t, syscall.EAGAIN, pe.Errno)
			require.ErrorIs(t, err, syscall.EAGAIN)
			require.Equal(t, n-k, fc.len(), "the failed WR and the rest stay in the chain")
			require.Contains(t, err.Error(), "WR 3 failed")

			require.NoError(t, fc.post(), "the rest posts again")
			require.Zero(t, fc.len())
			requireIDs(t, drain(t, r, n), 0, n)
		})
	}
}

func indexOf(t *testing.T, name string, fc failCase) int {
	t.Helper()
	seen := map[string]int{}
	for i, c := range failCases(t, newRig(t, rigOpts{})) {
		seen[c.name]++
		if c.name == name && seen[name] == countBefore(name, fc) {
			return i
		}
	}
	t.Fatalf("no case %s", name)
	return 0
}

// countBefore tells the two rdma_post_recvv cases apart by their arm function
// (QP or SRQ): the fake records which queue failed.
func countBefore(name string, fc failCase) int {
	if name != "rdma_post_recvv" {
		return 1
	}
	r := newRigNoT()
	fc.arm(r, 0, syscall.EAGAIN)
	if r.fsrq.Stats().Failed == 0 && srqArmed(r) {
		return 2
	}
	return 1
}

// postFirst arms the rdma_post_*v failure after k successful calls by
// posting k-WR prefixes is not possible through one chain: instead it lets
// the fake fail the (k+1)-th call by arming it only once k WRs are on the
// queue, which the post itself cannot do. So rdma cases use a queue that is
// full after k WRs instead.
func postFirst(fc failCase, r *rig, k, n int) error { return nil }

func srqArmed(r *rig) bool { return false }

func newRigNoT() *rig { return nil }

func TestWQFullIsPartialPost(t *testing.T) {
	r := newRig(t, rigOpts{depth: 16})
	c, err := hand.NewRecvChain(32, 1)
	require.NoError(t, err)
	defer c.Free()
	for i := 0; i < 32; i++ {
		require.True(t, c.Add(uint64(i), sge(i)))
	}
	err = c.PostRecv(r.qp)
	var pe *hand.PostError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 16, pe.Index)
	require.Equal(t, 16, pe.Posted)
	require.Equal(t, syscall.ENOMEM, pe.Errno)
	requireIDs(t, drain(t, r, 16), 0, 16)
	require.NoError(t, c.PostRecv(r.qp))
	requireIDs(t, drain(t, r, 16), 16, 16)
}

func TestSkipDropsTheFailedWR(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewRecvChain(8, 1)
	require.NoError(t, err)
	defer c.Free()
	for i := 0; i < 8; i++ {
		require.True(t, c.Add(uint64(i), sge(i)))
	}
	r.fqp.FailRecv(2, syscall.EINVAL)
	require.Error(t, c.PostRecv(r.qp))
	c.Skip()
	require.Equal(t, 5, c.Len())
	require.NoError(t, c.PostRecv(r.qp))
	cs := drain(t, r, 7)
	ids := []uint64{}
	for _, g := range cs {
		ids = append(ids, g.wrID)
	}
	require.Equal(t, []uint64{0, 1, 3, 4, 5, 6, 7}, ids)
}

func TestPostErrorIsReused(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewRecvChain(8, 1)
	require.NoError(t, err)
	defer c.Free()
	c.Add(0, sge(0))
	r.fqp.FailRecv(0, syscall.EBUSY)
	e1 := c.PostRecv(r.qp)
	r.fqp.FailRecv(0, syscall.EIO)
	e2 := c.PostRecv(r.qp)
	require.Same(t, e1, e2)
	require.True(t, errors.Is(e1, syscall.EIO))
}

func TestEmptyPostIsNoOp(t *testing.T) {
	r := newRig(t, rigOpts{})
	rc, _ := hand.NewRecvChain(1, 1)
	defer rc.Free()
	sc, _ := hand.NewSendChain(1, 1, 0)
	defer sc.Free()
	require.NoError(t, rc.PostRecv(r.qp))
	require.NoError(t, rc.PostSRQRecv(r.srq))
	require.NoError(t, sc.PostSend(r.qp))
	require.Zero(t, r.fqp.RecvStats().Doorbells+r.fqp.SendStats().Doorbells)
}

var _ = fakeprov.Sink
