package hand_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// rig is a fake device with one CQ, one QP on it and one SRQ feeding it.
type rig struct {
	p     *fakeprov.Provider
	cq    *fakeprov.CQ
	fqp   *fakeprov.QP
	fsrq  *fakeprov.SRQ
	qp    *verbs.QP
	srq   *verbs.SRQ
	vcq   *verbs.CQ
	vcqEx *verbs.CQEx
	ah    *verbs.AH
	hah   *hand.AH // on ah
}

type rigOpts struct {
	typ   int // fakeprov.RC when 0
	depth int // WQ depth (basic blocks) of every queue
	cqe   int
	sge   int
}

func newRig(t testing.TB, o rigOpts) *rig {
	t.Helper()
	if o.depth == 0 {
		o.depth = 1024
	}
	if o.cqe == 0 {
		o.cqe = 4096
	}
	if o.sge == 0 {
		o.sge = 4
	}
	p, err := fakeprov.New()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	cq, err := p.NewCQ(o.cqe)
	require.NoError(t, err)
	qp, err := p.NewQP(fakeprov.QPAttr{Type: o.typ, SendCQ: cq, RecvCQ: cq, MaxSendWR: o.depth,
		MaxRecvWR: o.depth, MaxSendSGE: o.sge, MaxRecvSGE: o.sge, MaxInline: 64})
	require.NoError(t, err)
	srq, err := p.NewSRQ(cq, o.depth, o.sge)
	require.NoError(t, err)
	srq.SetQPNum(qp.Num())
	ah, err := p.NewAH()
	require.NoError(t, err)
	return &rig{
		p: p, cq: cq, fqp: qp, fsrq: srq,
		qp:    (*verbs.QP)(qp.Ptr()),
		srq:   (*verbs.SRQ)(srq.Ptr()),
		vcq:   (*verbs.CQ)(cq.Ptr()),
		vcqEx: (*verbs.CQEx)(cq.ExPtr()),
		ah:    (*verbs.AH)(ah),
		hah:   hand.AHOn((*verbs.AH)(ah)),
	}
}

// cmID makes an rdma_cm_id on the rig's QP, with its SRQ when withSRQ.
func (r *rig) cmID(t testing.TB, withSRQ bool) *rdmacm.CMID {
	t.Helper()
	var s *fakeprov.SRQ
	if withSRQ {
		s = r.fsrq
	}
	id, err := r.p.NewCMID(r.fqp, s)
	require.NoError(t, err)
	return (*rdmacm.CMID)(id)
}

// sge is the scatter entry of WR i in tests: fake addresses, never dereferenced.
func sge(i int) verbs.SGE {
	return verbs.SGE{Addr: 0x10000 + uint64(i)*64, Length: 64, LKey: 0x1234}
}
