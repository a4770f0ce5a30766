package rxe

import (
	"fmt"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"testing"

	"github.com/goverbs/goverbs/generated/verbs"
)

// Two RC QPs share one SRQ fed by two ibv_post_srq_recv chains. Each of
// two senders sends 20 messages to its own receiving QP: the 40 receive
// completions on the shared CQ name the QP each message arrived on, use
// each SRQ buffer at most once (the first 40 posted, in FIFO order), keep
// each sender's order, and hold its bytes.
func TestVerbsSRQShared(t *testing.T) {
	const (
		perSender = 20
		posted    = 48 // two chains of 24; 8 stay unused
		slot      = 2048
	)
	e := openVerbs(t)
	srq, err := verbs.CreateSRQ(e.pd, &verbs.SRQInitAttr{Attr: verbs.SRQAttr{MaxWR: 64, MaxSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := verbs.DestroySRQ(srq); err != nil {
			t.Errorf("ibv_destroy_srq: %v", err)
		}
	})
	var sattr verbs.SRQAttr
	if err := verbs.QuerySRQ(srq, &sattr); err != nil || sattr.MaxWR < 64 {
		t.Fatalf("ibv_query_srq: %v, attr %+v; want max_wr >= 64", err, sattr)
	}

	rcq := e.cq(t, 64)
	var senders, receivers [2]*verbs.QP
	var scqs [2]*vCQ
	for i := range 2 {
		scqs[i] = e.cq(t, 32)
		senders[i] = e.qp(t, vQPConfig{typ: verbs.QPTRC, send: scqs[i], recv: scqs[i], sendWR: perSender, recvWR: 1})
		receivers[i] = e.qp(t, vQPConfig{typ: verbs.QPTRC, send: rcq, recv: rcq, srq: srq, sendWR: 1})
		if receivers[i].SRQ != srq {
			t.Fatalf("receiver %d: struct ibv_qp.srq %p, want %p", i, receivers[i].SRQ, srq)
		}
		e.connectRC(t, senders[i], receivers[i])
	}

	dst := e.mr(t, posted*slot)
	fill(dst.buf, 0x33)
	rc := testkit.RecvChain(t, posted/2, 1)
	for c := range 2 {
		v := rc.Reserve(posted / 2)
		for i := range posted / 2 {
			k := c*posted/2 + i
			v.Set(i, uint64(300+k), dst.sge(k*slot, slot))
		}
		if err := rc.PostSRQRecvRaw(srq); err != nil {
			t.Fatalf("ibv_post_srq_recv, chain %d of %d WRs: %v", c, posted/2, err)
		}
	}

	// Message j of sender s: its first two bytes say who and which, the
	// rest is a pattern of its own.
	src := e.mr(t, 2*perSender*slot)
	msg := func(s, j int) []byte {
		off := (s*perSender + j) * slot
		return src.buf[off : off+100+j*50+s]
	}
	for s := range 2 {
		for j := range perSender {
			m := msg(s, j)
			fill(m, 1000+s*100+j)
			m[0], m[1] = byte(s), byte(j)
		}
	}
	sc := testkit.SendChain(t, perSender, 1)
	for s := range 2 {
		v := sc.Reserve(perSender)
		for j := range perSender {
			off := (s*perSender + j) * slot
			v.SetSend(j, uint64(s*1000+j), verbs.SendSignaled, src.sge(off, len(msg(s, j))))
		}
		if err := sc.PostSendRaw(senders[s]); err != nil {
			t.Fatalf("sender %d: post %d sends: %v", s, perSender, err)
		}
	}

	w := rcq.reap(t, 2*perSender)
	mustOK(t, w)
	used := wcByID(t, w)
	for k := range 2 * perSender {
		if _, ok := used[uint64(300+k)]; !ok {
			t.Errorf("SRQ buffer %d (among the first %d posted) was not used; used %s", 300+k, 2*perSender, testkit.DescribeWCs(w))
		}
	}
	next := [2]int{}
	for _, c := range w {
		k := int(c.WRID() - 300)
		buf := dst.buf[k*slot : k*slot+int(c.ByteLen())]
		if len(buf) < 2 || buf[0] > 1 {
			t.Fatalf("completion wr_id %d: %d bytes, no sender header", c.WRID(), len(buf))
		}
		s, j := int(buf[0]), int(buf[1])
		if c.QPNum() != receivers[s].QPNum {
			t.Fatalf("message %d of sender %d arrived on QP %d, want receiver %d (QP %d)", j, s, c.QPNum(), s, receivers[s].QPNum)
		}
		if j != next[s] {
			t.Fatalf("sender %d: message %d arrived after %d (RC keeps order)", s, j, next[s]-1)
		}
		next[s]++
		testkit.SameBytes(t, fmt.Sprintf("message %d of sender %d in SRQ buffer %d", j, s, k), buf, msg(s, j))
	}
	if next != [2]int{perSender, perSender} {
		t.Fatalf("messages per sender: %v, want %d each", next, perSender)
	}
	// The unused buffers are untouched.
	for k := 2 * perSender; k < posted; k++ {
		testkit.SameBytes(t, fmt.Sprintf("unused SRQ buffer %d", k), dst.buf[k*slot:(k+1)*slot], shiftedFill(0x33, k*slot, slot))
	}
	for s := range 2 {
		sw := scqs[s].reap(t, perSender)
		mustOK(t, sw)
	}
	rcq.expectEmpty(t)
}
