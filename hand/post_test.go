package hand_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
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
	p, err := hand.NewPollerRaw(r.vcq, 64)
	require.NoError(t, err)
	defer p.Close()
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
	defer c.Close()
	next := 0
	for n := 1; n <= 1024; n++ {
		for i := 0; i < n; i++ {
			c.Reserve(1).Set(0, uint64(next+i), sge(i))
		}
		require.Equal(t, n, c.Len())
		require.NoError(t, c.PostRecvRaw(r.qp))
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
	defer c.Close()
	v := c.Reserve(2)
	require.Equal(t, 2, v.Len())
	v.SetSGL(0, 7, []verbs.SGE{sge(0), sge(1), sge(2)})
	require.Panics(t, func() { v.SetSGL(1, 8, []verbs.SGE{sge(0), sge(1), sge(2), sge(3)}) }, "maxSGE is 3")
	v.Set(1, 8, sge(3))
	require.Equal(t, uint64(8), v.WR(1).WRID)
	require.NoError(t, c.PostRecvRaw(r.qp))
	wqe := r.fqp.RecvWQE(0)
	for k := 0; k < 3; k++ {
		s := sge(k)
		require.Equal(t, s.Length, binary.BigEndian.Uint32(wqe[16*k:]))
		require.Equal(t, s.LKey, binary.BigEndian.Uint32(wqe[16*k+4:]))
		require.Equal(t, s.Addr, binary.BigEndian.Uint64(wqe[16*k+8:]))
	}
	cs := drain(t, r, 2)
	require.Equal(t, uint32(3*64), cs[0].byteLen)
	require.Equal(t, uint32(64), cs[1].byteLen)
}

func TestRecvChainFull(t *testing.T) {
	c, err := hand.NewRecvChain(2, 1)
	require.NoError(t, err)
	defer c.Close()
	c.Reserve(1).Set(0, 1, sge(0))
	require.Equal(t, 1, c.Room())
	require.Panics(t, func() { c.Reserve(2) }, "one WR left")
	c.Reserve(1).Set(0, 2, sge(1))
	require.Panics(t, func() { c.Reserve(1) }, "the chain is full")
	require.Equal(t, 2, c.Len())
	require.Equal(t, 0, c.Room())
	require.Panics(t, func() { c.Reserve(1).Set(1, 0, sge(0)) }, "outside the view")
}

func TestSRQChain(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewRecvChain(1024, 1)
	require.NoError(t, err)
	defer c.Close()
	next := 0
	for _, n := range []int{1, 2, 7, 64, 1000, 1024} {
		for i := 0; i < n; i++ {
			c.Reserve(1).Set(0, uint64(next+i), sge(i))
		}
		require.NoError(t, c.PostSRQRecvRaw(r.srq))
		requireIDs(t, drain(t, r, n), next, n)
		next += n
	}
	require.Equal(t, uint64(next), r.fsrq.Stats().Posted)
}

// failCase is one post entry point with its fake failure knob.
type failCase struct {
	name string
	// arm makes the post of WR k (of a chain of n) fail with errno e.
	arm  func(r *rig, k int, e syscall.Errno)
	add  func(i int)
	post func() error
	len  func() int
}

func failCases(t *testing.T, r *rig) []failCase {
	t.Helper()
	rc, err := hand.NewRecvChain(64, 1)
	require.NoError(t, err)
	t.Cleanup(func() { rc.Close() })
	sc, err := hand.NewSendChain(64, 1, 0)
	require.NoError(t, err)
	t.Cleanup(func() { sc.Close() })
	id := r.cmID(t, false)
	idSRQ := r.cmID(t, true)
	recvAdd := func(i int) { rc.Reserve(1).Set(0, uint64(i), sge(i)) }
	sendAdd := func(i int) { sc.Reserve(1).SetSend(0, uint64(i), hand.Signaled, sge(i)) }
	writeAdd := func(i int) {
		sc.Reserve(1).SetWrite(0, uint64(i), hand.Signaled, sge(i), 0x200000, 0x5678)
	}
	readAdd := func(i int) {
		sc.Reserve(1).SetRead(0, uint64(i), hand.Signaled, sge(i), 0x200000, 0x5678)
	}
	qpRecv := func(r *rig, k int, e syscall.Errno) { r.fqp.FailRecv(k, e) }
	qpSend := func(r *rig, k int, e syscall.Errno) { r.fqp.FailSend(k, e) }
	srqRecv := func(r *rig, k int, e syscall.Errno) { r.fsrq.FailRecv(k, e) }
	// rdma_post_*v make one post call per WR: WR k is call k, at its index 0.
	qpRecvCall := func(r *rig, k int, e syscall.Errno) { r.fqp.FailRecvCall(k, 0, e) }
	qpSendCall := func(r *rig, k int, e syscall.Errno) { r.fqp.FailSendCall(k, 0, e) }
	srqRecvCall := func(r *rig, k int, e syscall.Errno) { r.fsrq.FailRecvCall(k, 0, e) }
	return []failCase{
		{"ibv_post_recv", qpRecv, recvAdd, func() error { return rc.PostRecvRaw(r.qp) }, rc.Len},
		{"ibv_post_srq_recv", srqRecv, recvAdd, func() error { return rc.PostSRQRecvRaw(r.srq) }, rc.Len},
		{"ibv_post_send", qpSend, writeAdd, func() error { return sc.PostSendRaw(r.qp) }, sc.Len},
		{"rdma_post_recvv", qpRecvCall, recvAdd, func() error { return rc.PostRecvvRaw(id) }, rc.Len},
		{"rdma_post_recvv", srqRecvCall, recvAdd, func() error { return rc.PostRecvvRaw(idSRQ) }, rc.Len},
		{"rdma_post_sendv", qpSendCall, sendAdd, func() error { return sc.PostSendvRaw(id) }, sc.Len},
		{"rdma_post_readv", qpSendCall, readAdd, func() error { return sc.PostReadvRaw(id) }, sc.Len},
		{"rdma_post_writev", qpSendCall, writeAdd, func() error { return sc.PostWritevRaw(id) }, sc.Len},
	}
}

func TestMidChainFailureKeepsTheRest(t *testing.T) {
	const n = 8
	cases := len(failCases(t, newRig(t, rigOpts{})))
	for ci := 0; ci < cases; ci++ {
		for _, k := range []int{0, 3, n - 1} {
			r := newRig(t, rigOpts{})
			fc := failCases(t, r)[ci]
			t.Run(fc.name, func(t *testing.T) {
				for i := 0; i < n; i++ {
					fc.add(i)
				}
				fc.arm(r, k, syscall.EAGAIN)
				err := fc.post()
				var pe *hand.PostError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, fc.name, pe.Op)
				require.Equal(t, k, pe.Index)
				require.Equal(t, k, pe.Posted)
				require.Equal(t, syscall.EAGAIN, pe.Errno)
				require.ErrorIs(t, err, syscall.EAGAIN)
				require.Equal(t, n-k, fc.len(), "the failed WR and the rest stay in the chain")
				require.Contains(t, err.Error(), fc.name)

				require.NoError(t, fc.post(), "the rest posts again")
				require.Zero(t, fc.len())
				requireIDs(t, drain(t, r, n), 0, n)
			})
		}
	}
}

func TestSecondFailureCountsFromTheChainStart(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewRecvChain(8, 1)
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < 8; i++ {
		c.Reserve(1).Set(0, uint64(i), sge(i))
	}
	r.fqp.FailRecv(2, syscall.EAGAIN)
	require.Error(t, c.PostRecvRaw(r.qp))
	r.fqp.FailRecv(3, syscall.EAGAIN) // index 3 of the call: WR 5 of the chain
	var pe *hand.PostError
	require.ErrorAs(t, c.PostRecvRaw(r.qp), &pe)
	require.Equal(t, 5, pe.Index)
	require.Equal(t, 3, pe.Posted)
	require.NoError(t, c.PostRecvRaw(r.qp))
	requireIDs(t, drain(t, r, 8), 0, 8)
}

func TestWQFullIsPartialPost(t *testing.T) {
	r := newRig(t, rigOpts{depth: 16})
	c, err := hand.NewRecvChain(32, 1)
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < 32; i++ {
		c.Reserve(1).Set(0, uint64(i), sge(i))
	}
	err = c.PostRecvRaw(r.qp)
	var pe *hand.PostError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 16, pe.Index)
	require.Equal(t, 16, pe.Posted)
	require.Equal(t, syscall.ENOMEM, pe.Errno)
	requireIDs(t, drain(t, r, 16), 0, 16)
	require.NoError(t, c.PostRecvRaw(r.qp))
	requireIDs(t, drain(t, r, 16), 16, 16)
}

func TestSkipDropsTheFailedWR(t *testing.T) {
	r := newRig(t, rigOpts{})
	c, err := hand.NewRecvChain(8, 1)
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < 8; i++ {
		c.Reserve(1).Set(0, uint64(i), sge(i))
	}
	r.fqp.FailRecv(2, syscall.EINVAL)
	require.Error(t, c.PostRecvRaw(r.qp))
	c.Skip()
	require.Equal(t, 5, c.Len())
	require.NoError(t, c.PostRecvRaw(r.qp))
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
	defer c.Close()
	c.Reserve(1).Set(0, 0, sge(0))
	r.fqp.FailRecv(0, syscall.EBUSY)
	e1 := c.PostRecvRaw(r.qp)
	r.fqp.FailRecv(0, syscall.EIO)
	e2 := c.PostRecvRaw(r.qp)
	require.Same(t, e1, e2)
	require.True(t, errors.Is(e1, syscall.EIO))
}

func TestEmptyPostIsNoOp(t *testing.T) {
	r := newRig(t, rigOpts{})
	rc, _ := hand.NewRecvChain(1, 1)
	defer rc.Close()
	sc, _ := hand.NewSendChain(1, 1, 0)
	defer sc.Close()
	require.NoError(t, rc.PostRecvRaw(r.qp))
	require.NoError(t, rc.PostSRQRecvRaw(r.srq))
	require.NoError(t, sc.PostSendRaw(r.qp))
	require.Zero(t, r.fqp.RecvStats().Doorbells+r.fqp.SendStats().Doorbells)
}

// rxe's provider returns -errno: every post path reports the errno itself,
// the rdma_post_*v loops in C included (rdma_seterrno copies it as is).
func TestNegativeErrnoFromProvider(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(r *rig)
		post func(r *rig, c *hand.RecvChain) error
	}{
		{"ibv_post_recv", func(r *rig) { r.fqp.FailRecvCallNegative(0, 1, syscall.ENOMEM) },
			func(r *rig, c *hand.RecvChain) error { return c.PostRecvRaw(r.qp) }},
		{"rdma_post_recvv", func(r *rig) { r.fqp.FailRecvCallNegative(1, 0, syscall.ENOMEM) },
			func(r *rig, c *hand.RecvChain) error { return c.PostRecvvRaw(r.cmID(t, false)) }},
		{"rdma_post_recvv", func(r *rig) { r.fsrq.FailRecvCallNegative(1, 0, syscall.ENOMEM) },
			func(r *rig, c *hand.RecvChain) error { return c.PostRecvvRaw(r.cmID(t, true)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOpts{})
			c, err := hand.NewRecvChain(4, 1)
			require.NoError(t, err)
			defer c.Close()
			for i := range 3 {
				c.Reserve(1).Set(0, uint64(i), sge(i))
			}
			tc.arm(r)
			err = tc.post(r, c)
			var pe *hand.PostError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.name, pe.Op)
			require.Equal(t, 1, pe.Index)
			require.Equal(t, syscall.ENOMEM, pe.Errno, "%v", err)
			require.ErrorIs(t, err, syscall.ENOMEM)
		})
	}
}

// A provider that fails naming no WR (bad_wr left NULL) may have queued
// them all, as rxe's does when its doorbell fails: the PostError says the
// outcome is unknown, in place of claiming nothing was posted, and the
// chain keeps the WRs for the caller to decide.
func TestPostFailureNamingNoWR(t *testing.T) {
	r := newRig(t, rigOpts{})
	sc, err := hand.NewSendChain(4, 1, 0)
	require.NoError(t, err)
	defer sc.Close()
	for i := range 3 {
		sc.Reserve(1).SetSend(0, uint64(i), hand.Signaled, sge(i))
	}
	r.fqp.FailSendDoorbell(-int(syscall.EINVAL))
	err = sc.PostSendRaw(r.qp)
	var pe *hand.PostError
	require.ErrorAs(t, err, &pe)
	require.True(t, pe.Unknown)
	require.Equal(t, syscall.EINVAL, pe.Errno)
	require.Equal(t, 0, pe.Index)
	require.Equal(t, 0, pe.Posted)
	require.Contains(t, err.Error(), "naming no WR")
	require.Equal(t, 3, sc.Len(), "the chain keeps them")
	requireIDs(t, drain(t, r, 3), 0, 3) // the fake, as rxe, queued them all
	sc.Reset()

	rc, err := hand.NewRecvChain(4, 1)
	require.NoError(t, err)
	defer rc.Close()
	rc.Reserve(1).Set(0, 7, sge(0))
	r.fqp.FailRecv(0, syscall.EAGAIN)
	require.ErrorAs(t, rc.PostRecvRaw(r.qp), &pe)
	require.False(t, pe.Unknown, "a failure that names its WR")
}

// cmCase is an rdma_post_*v path with its fake failure knobs: the post
// call after skip calls (each posts one WR) fails, having queued its WR and
// naming none (doorbell), or naming the WR it refused (reject).
type cmCase struct {
	name     string // PostError.Op
	path     string // the subtest's name
	doorbell func(r *rig, skip int, ret int)
	reject   func(r *rig, skip int, e syscall.Errno)
	add      func(i int)
	post     func() error
	len      func() int
	skip     func()
}

func cmCases(t *testing.T, r *rig) []cmCase {
	t.Helper()
	rc, err := hand.NewRecvChain(8, 1)
	require.NoError(t, err)
	t.Cleanup(func() { rc.Close() })
	sc, err := hand.NewSendChain(8, 1, 0)
	require.NoError(t, err)
	t.Cleanup(func() { sc.Close() })
	id, idSRQ := r.cmID(t, false), r.cmID(t, true)
	// A QP made on the SRQ, with an id that does not know of it: the C loop
	// posts to the QP's SRQ (the fallback rdma_post_recvv lacks).
	onSRQ, err := r.p.NewQP(fakeprov.QPAttr{SendCQ: r.cq, RecvCQ: r.cq, SRQ: r.fsrq, MaxSendWR: 16, MaxSendSGE: 1})
	require.NoError(t, err)
	idOnSRQ, err := r.p.NewCMID(onSRQ, nil)
	require.NoError(t, err)

	recvAdd := func(i int) { rc.Reserve(1).Set(0, uint64(i), sge(i)) }
	sendAdd := func(i int) { sc.Reserve(1).SetSend(0, uint64(i), hand.Signaled, sge(i)) }
	readAdd := func(i int) { sc.Reserve(1).SetRead(0, uint64(i), hand.Signaled, sge(i), 0x200000, 0x5678) }
	writeAdd := func(i int) { sc.Reserve(1).SetWrite(0, uint64(i), hand.Signaled, sge(i), 0x200000, 0x5678) }
	sendDB := func(r *rig, skip, ret int) { r.fqp.FailSendDoorbellCall(skip, ret) }
	sendReject := func(r *rig, skip int, e syscall.Errno) { r.fqp.FailSendCall(skip, 0, e) }
	qpDB := func(r *rig, skip, ret int) { r.fqp.FailRecvDoorbellCall(skip, ret) }
	qpReject := func(r *rig, skip int, e syscall.Errno) { r.fqp.FailRecvCall(skip, 0, e) }
	srqDB := func(r *rig, skip, ret int) { r.fsrq.FailRecvDoorbellCall(skip, ret) }
	srqReject := func(r *rig, skip int, e syscall.Errno) { r.fsrq.FailRecvCall(skip, 0, e) }
	return []cmCase{
		{"rdma_post_sendv", "sendv", sendDB, sendReject, sendAdd, func() error { return sc.PostSendvRaw(id) }, sc.Len, sc.Skip},
		{"rdma_post_readv", "readv", sendDB, sendReject, readAdd, func() error { return sc.PostReadvRaw(id) }, sc.Len, sc.Skip},
		{"rdma_post_writev", "writev", sendDB, sendReject, writeAdd, func() error { return sc.PostWritevRaw(id) }, sc.Len, sc.Skip},
		{"rdma_post_recvv", "recvv QP", qpDB, qpReject, recvAdd, func() error { return rc.PostRecvvRaw(id) }, rc.Len, rc.Skip},
		{"rdma_post_recvv", "recvv id's SRQ", srqDB, srqReject, recvAdd, func() error { return rc.PostRecvvRaw(idSRQ) }, rc.Len, rc.Skip},
		{"rdma_post_recvv", "recvv QP's SRQ", srqDB, srqReject, recvAdd,
			func() error { return rc.PostRecvvRaw((*rdmacm.CMID)(idOnSRQ)) }, rc.Len, rc.Skip},
	}
}

// The rdma_post_*v paths post one WR a call. A call that fails naming no
// WR, as rxe's does when its doorbell fails, may have queued its WR: the
// PostError says Unknown, for that WR alone (the WRs before it went, each
// with a call that succeeded; those after it were not posted), and the
// chain keeps it and the rest, so that a caller does not post it twice
// blindly. A call that names the WR it refused leaves that WR and the rest
// to post again.
func TestCMPostFailureNamingNoWR(t *testing.T) {
	const n = 3
	for ci, c0 := range cmCases(t, newRig(t, rigOpts{})) {
		for _, k := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/doorbell at WR %d", c0.path, k), func(t *testing.T) {
				r := newRig(t, rigOpts{})
				c := cmCases(t, r)[ci]
				for i := range n {
					c.add(i)
				}
				c.doorbell(r, k, -int(syscall.EINVAL))
				err := c.post()
				var pe *hand.PostError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, c.name, pe.Op)
				require.True(t, pe.Unknown, "%v", err)
				require.Equal(t, k, pe.Index)
				require.Equal(t, k, pe.Posted)
				require.Equal(t, syscall.EINVAL, pe.Errno)
				require.ErrorContains(t, err, "naming no WR")
				require.ErrorContains(t, err, "none after it")
				require.Equal(t, n-k, c.len(), "the chain keeps the WR in doubt and the rest")
				requireIDs(t, drain(t, r, k+1), 0, k+1) // the fake, as rxe, queued WR k

				c.skip()
				require.NoError(t, c.post())
				requireIDs(t, drain(t, r, n-k-1), k+1, n-k-1) // each WR once
			})
			t.Run(fmt.Sprintf("%s/refused at WR %d", c0.path, k), func(t *testing.T) {
				r := newRig(t, rigOpts{})
				c := cmCases(t, r)[ci]
				for i := range n {
					c.add(i)
				}
				c.reject(r, k, syscall.EAGAIN)
				err := c.post()
				var pe *hand.PostError
				require.ErrorAs(t, err, &pe)
				require.False(t, pe.Unknown, "%v", err)
				require.Equal(t, k, pe.Index)
				require.Equal(t, k, pe.Posted)
				require.Equal(t, syscall.EAGAIN, pe.Errno)
				require.NotContains(t, err.Error(), "naming no WR")
				require.Equal(t, n-k, c.len(), "the refused WR and the rest stay")
				requireIDs(t, drain(t, r, k), 0, k)

				require.NoError(t, c.post(), "they post again")
				requireIDs(t, drain(t, r, n-k), k, n-k)
			})
		}
	}
}
