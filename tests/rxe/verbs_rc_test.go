package rxe

import (
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"strconv"
	"testing"

	"github.com/goverbs/goverbs/generated/verbs"
)

// msgLen is the length of message i of the send tests: from 1 byte to
// several MTUs, so single- and multi-packet messages both occur.
func msgLen(i int) int { return 1 + (i*397)%4096 }

// 64 receives posted as one chain and 64 sends posted as one chain: every
// message lands in its own buffer, in order, byte for byte, with its wr_id,
// length and opcode; every send completes once with its wr_id, in order.
func TestVerbsRCSendRecvChain(t *testing.T) {
	const n, slot = 64, 4096
	e := openVerbs(t)
	p := e.rcPair(t, n, 1)
	src, dst := e.mr(t, n*slot), e.mr(t, n*slot)
	for i := range n {
		fill(src.buf[i*slot:(i+1)*slot], i+1)
	}
	fill(dst.buf, 0xee) // what was there before must be overwritten, not matched by luck

	rc := testkit.RecvChain(t, n, 1)
	rv := rc.Reserve(n)
	for i := range n {
		rv.Set(i, uint64(1000+i), dst.sge(i*slot, slot))
	}
	if rc.Len() != n {
		t.Fatalf("recv chain holds %d WRs, want %d", rc.Len(), n)
	}
	if err := rc.PostRecvRaw(p.b); err != nil {
		t.Fatalf("posting %d receives as one chain: %v", n, err)
	}
	if rc.Len() != 0 {
		t.Fatalf("recv chain holds %d WRs after a full post", rc.Len())
	}

	sc := testkit.SendChain(t, n, 1)
	sv := sc.Reserve(n)
	for i := range n {
		sv.SetSend(i, uint64(2000+i), verbs.SendSignaled, src.sge(i*slot, msgLen(i)))
	}
	if err := sc.PostSendRaw(p.a); err != nil {
		t.Fatalf("posting %d sends as one chain: %v", n, err)
	}

	recvs := p.bcq.reap(t, n)
	mustOK(t, recvs)
	for i, w := range recvs {
		if w.WRID() != uint64(1000+i) || w.Opcode() != verbs.WCRecv || int(w.ByteLen()) != msgLen(i) || w.QPNum() != p.b.QPNum || w.HasImm() {
			t.Fatalf("receive %d: wr_id %d opcode %d len %d qp %d imm %v; want wr_id %d RECV len %d qp %d no imm",
				i, w.WRID(), w.Opcode(), w.ByteLen(), w.QPNum(), w.HasImm(), 1000+i, msgLen(i), p.b.QPNum)
		}
		testkit.SameBytes(t, "message "+strconv.Itoa(i), dst.buf[i*slot:i*slot+msgLen(i)], src.buf[i*slot:i*slot+msgLen(i)])
		// The rest of the slot is untouched.
		testkit.SameBytes(t, "the unused tail of buffer "+strconv.Itoa(i), dst.buf[i*slot+msgLen(i):(i+1)*slot], shiftedFill(0xee, i*slot+msgLen(i), slot-msgLen(i)))
	}
	sends := p.acq.reap(t, n)
	mustOK(t, sends)
	for i, w := range sends {
		if w.WRID() != uint64(2000+i) || w.Opcode() != verbs.WCSend || w.QPNum() != p.a.QPNum {
			t.Fatalf("send completion %d: wr_id %d opcode %d qp %d; want %d SEND qp %d", i, w.WRID(), w.Opcode(), w.QPNum(), 2000+i, p.a.QPNum)
		}
	}
	p.acq.expectEmpty(t)
	p.bcq.expectEmpty(t)
}

// A send gathered from three scattered pieces lands scattered over two
// receive buffers, and the chains are reusable: a second round through the
// same chains, after a full post emptied them, moves new data.
func TestVerbsRCScatterGather(t *testing.T) {
	e := openVerbs(t)
	p := e.rcPair(t, 8, 3)
	src, dst := e.mr(t, 1<<16), e.mr(t, 1<<16)
	rc := testkit.RecvChain(t, 4, 3)
	sc := testkit.SendChain(t, 4, 3)

	for round := range 2 {
		fill(src.buf, 10+round)
		clear(dst.buf)
		// Gather: 100 bytes at 0, 2000 at 8192, 900 at 30000 (3000 in all).
		var want []byte
		want = append(want, src.buf[0:100]...)
		want = append(want, src.buf[8192:10192]...)
		want = append(want, src.buf[30000:30900]...)
		// Scatter: 1500 bytes at 40000, the rest at 50000.
		rc.Reserve(1).SetSGL(0, uint64(round), []verbs.SGE{dst.sge(40000, 1500), dst.sge(50000, 4000)})
		if err := rc.PostRecvRaw(p.b); err != nil {
			t.Fatalf("round %d: post recv: %v", round, err)
		}
		sv := sc.Reserve(1)
		sv.SetSend(0, uint64(10+round), verbs.SendSignaled, src.sge(0, 100))
		sv.SetSGL(0, []verbs.SGE{src.sge(0, 100), src.sge(8192, 2000), src.sge(30000, 900)})
		if err := sc.PostSendRaw(p.a); err != nil {
			t.Fatalf("round %d: post send: %v", round, err)
		}
		r := p.bcq.reap(t, 1)
		mustOK(t, r)
		if r[0].WRID() != uint64(round) || r[0].ByteLen() != 3000 {
			t.Fatalf("round %d: receive wr_id %d len %d, want %d len 3000", round, r[0].WRID(), r[0].ByteLen(), round)
		}
		got := append(append([]byte(nil), dst.buf[40000:41500]...), dst.buf[50000:51500]...)
		testkit.SameBytes(t, "scattered receive, round "+strconv.Itoa(round), got, want)
		testkit.SameBytes(t, "after the scattered receive", dst.buf[51500:54000], make([]byte, 2500))
		s := p.acq.reap(t, 1)
		mustOK(t, s)
		if s[0].WRID() != uint64(10+round) {
			t.Fatalf("round %d: send wr_id %d", round, s[0].WRID())
		}
	}
}

// RDMA writes posted as one chain, only the last signalled: one completion
// (RC completes in order, so it vouches for the two before it), and the
// peer's memory holds the three regions byte for byte, nothing around them.
func TestVerbsRCWrite(t *testing.T) {
	e := openVerbs(t)
	p := e.rcPair(t, 8, 1)
	src, dst := e.mr(t, 1<<16), e.mr(t, 1<<16)
	fill(src.buf, 3)
	regions := []struct{ from, to, n int }{{0, 100, 64}, {4096, 20000, 5000}, {12000, 60000, 5536}}

	sc := testkit.SendChain(t, 8, 1)
	sv := sc.Reserve(len(regions))
	for i, r := range regions {
		flags := verbs.SendFlags(0)
		if i == len(regions)-1 {
			flags = verbs.SendSignaled
		}
		sv.SetWrite(i, uint64(i), flags, src.sge(r.from, r.n), dst.addr(r.to), dst.mr.RKey)
	}
	if err := sc.PostSendRaw(p.a); err != nil {
		t.Fatalf("post write chain: %v", err)
	}
	w := p.acq.reap(t, 1)
	mustOK(t, w)
	if w[0].WRID() != 2 || w[0].Opcode() != verbs.WCRDMAWrite {
		t.Fatalf("write completion wr_id %d opcode %d, want 2 RDMA_WRITE", w[0].WRID(), w[0].Opcode())
	}
	want := make([]byte, len(dst.buf))
	for _, r := range regions {
		copy(want[r.to:r.to+r.n], src.buf[r.from:r.from+r.n])
	}
	testkit.SameBytes(t, "the peer's memory after three RDMA writes", dst.buf, want)
	p.acq.expectEmpty(t)
	p.bcq.expectEmpty(t) // a plain write consumes no receive and raises no completion
}

// Immediate data given in host order comes back in host order from the
// completion (and in network order in the raw struct ibv_wc), for an RDMA
// write with immediate, which consumes a receive without touching its
// buffer, and for a send with immediate.
func TestVerbsRCImmediate(t *testing.T) {
	e := openVerbs(t)
	p := e.rcPair(t, 8, 1)
	src, dst, rbuf := e.mr(t, 8192), e.mr(t, 8192), e.mr(t, 4096)
	fill(src.buf, 4)
	fill(rbuf.buf, 0x55)
	const writeImm, sendImm = 0xdeadbeef, 0x01020304

	rc := testkit.RecvChain(t, 2, 1)
	rv := rc.Reserve(2)
	rv.Set(0, 70, rbuf.sge(0, 2048))
	rv.Set(1, 71, rbuf.sge(2048, 2048))
	if err := rc.PostRecvRaw(p.b); err != nil {
		t.Fatalf("post recv: %v", err)
	}
	sc := testkit.SendChain(t, 2, 1)
	sv := sc.Reserve(2)
	sv.SetWriteImm(0, 80, verbs.SendSignaled, writeImm, src.sge(0, 3000), dst.addr(1000), dst.mr.RKey)
	sv.SetSendImm(1, 81, verbs.SendSignaled, sendImm, src.sge(5000, 200))
	if err := sc.PostSendRaw(p.a); err != nil {
		t.Fatalf("post send: %v", err)
	}

	r := p.bcq.reap(t, 2)
	mustOK(t, r)
	for i, c := range []struct {
		wrID   uint64
		opcode verbs.WCOpcode
		len    uint32
		imm    uint32
	}{{70, verbs.WCRecvRDMAWithImm, 3000, writeImm}, {71, verbs.WCRecv, 200, sendImm}} {
		w := &r[i]
		imm, ok := w.Imm()
		if w.WRID() != c.wrID || w.Opcode() != c.opcode || w.ByteLen() != c.len || !ok || imm != c.imm {
			t.Fatalf("receive %d: wr_id %d opcode %d len %d imm %#x (%v); want %d opcode %d len %d imm %#x",
				i, w.WRID(), w.Opcode(), w.ByteLen(), imm, ok, c.wrID, c.opcode, c.len, c.imm)
		}
		if w.Raw().ImmData != verbs.ToBe32(c.imm) || w.Raw().ImmData.Native() != c.imm {
			t.Fatalf("receive %d: raw imm_data %#x, want %#x in network order", i, uint32(w.Raw().ImmData), c.imm)
		}
	}
	testkit.SameBytes(t, "RDMA write with immediate", dst.buf[1000:4000], src.buf[0:3000])
	testkit.SameBytes(t, "receive buffer the write with immediate consumed", rbuf.buf[0:2048], shiftedFill(0x55, 0, 2048))
	testkit.SameBytes(t, "send with immediate", rbuf.buf[2048:2248], src.buf[5000:5200])
	s := p.acq.reap(t, 2)
	mustOK(t, s)
	if s[0].WRID() != 80 || s[0].Opcode() != verbs.WCRDMAWrite || s[1].WRID() != 81 || s[1].Opcode() != verbs.WCSend {
		t.Fatalf("send completions %s", testkit.DescribeWCs(s))
	}
}

// RDMA reads posted as one chain, the first scattering into two local
// buffers: the local memory holds the peer's bytes, and each read
// completes with its length.
func TestVerbsRCRead(t *testing.T) {
	e := openVerbs(t)
	p := e.rcPair(t, 8, 2)
	remote, local := e.mr(t, 1<<16), e.mr(t, 1<<16)
	fill(remote.buf, 5)
	fill(local.buf, 0x77)

	sc := testkit.SendChain(t, 4, 2)
	sv := sc.Reserve(3)
	sv.SetRead(0, 1, verbs.SendSignaled, local.sge(0, 1000), remote.addr(5000), remote.mr.RKey)
	sv.SetSGL(0, []verbs.SGE{local.sge(0, 1000), local.sge(2000, 3000)}) // the read's 4000 bytes land 1000 + 3000
	sv.SetRead(1, 2, verbs.SendSignaled, local.sge(10000, 1), remote.addr(65535), remote.mr.RKey)
	sv.SetRead(2, 3, verbs.SendSignaled, local.sge(20000, 40000), remote.addr(100), remote.mr.RKey)
	if err := sc.PostSendRaw(p.a); err != nil {
		t.Fatalf("post read chain: %v", err)
	}
	r := p.acq.reap(t, 3)
	mustOK(t, r)
	for i, want := range []struct {
		id  uint64
		len uint32
	}{{1, 4000}, {2, 1}, {3, 40000}} {
		if r[i].WRID() != want.id || r[i].Opcode() != verbs.WCRDMARead || r[i].ByteLen() != want.len {
			t.Fatalf("read completion %d: wr_id %d opcode %d len %d, want %d RDMA_READ len %d",
				i, r[i].WRID(), r[i].Opcode(), r[i].ByteLen(), want.id, want.len)
		}
	}
	expect := shiftedFill(0x77, 0, len(local.buf))
	copy(expect[0:1000], remote.buf[5000:6000])
	copy(expect[2000:5000], remote.buf[6000:9000])
	copy(expect[10000:10001], remote.buf[65535:])
	copy(expect[20000:60000], remote.buf[100:40100])
	testkit.SameBytes(t, "local memory after three RDMA reads", local.buf, expect)
	p.bcq.expectEmpty(t) // the responder's side of a read raises no completion
}

// shiftedFill is what fill(b, seed) wrote into b[off:off+n] when b was the
// whole buffer.
func shiftedFill(seed, off, n int) []byte {
	b := make([]byte, off+n)
	fill(b, seed)
	return b[off:]
}
