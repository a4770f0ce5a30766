package cross

import (
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"testing"
	"time"

	"github.com/goverbs/goverbs/generated/verbs"
)

const (
	rdmaRegion = 1 << 20
	rdmaChunk  = 64 << 10
	rdmaWRs    = rdmaRegion / rdmaChunk
	rdmaImm    = 0x600d1dea
)

// RDMA read and write of a registered buffer on the other host, both hosts
// at once over one RC connection: each side registers a 1 MiB region with
// its own pattern and sends its address, rkey and SHA-256 over the control
// channel. Each reads the peer's region in 64 KiB RDMA reads and checks it
// byte for byte and by SHA-256; then writes a new pattern over it, the
// last chunk with immediate data, whose receive completion tells the peer
// that the whole write has landed: the peer checks its region byte for
// byte and against the SHA-256 the writer sends. Each then reads back what
// it wrote.
func TestCrossRDMAReadWrite(t *testing.T) {
	p := ConnectPeer(t)
	ctx := p.Context()
	r := openRig(t, p)
	scq, rcq := r.cq(t, 2*rdmaWRs), r.cq(t, 4)
	qp := connectRC(t, p, r, scq, rcq, rdmaWRs, allAccess)
	region, local, small := r.mr(t, rdmaRegion), r.mr(t, rdmaRegion), r.mr(t, 64)
	Fill(region.Bytes(), seedOf(p.Role, testRDMA, 0))
	var peer regionMsg
	p.Exchange("region", regionMsg{RegionOf(region), Sum(region.Bytes())}, &peer)
	if peer.Len != rdmaRegion {
		t.Fatalf("the peer's region is %d bytes, want %d", peer.Len, rdmaRegion)
	}

	// The receive the peer's RDMA write with immediate data consumes.
	rc := testkit.RecvChain(t, 1, 1)
	rc.Reserve(1).Set(0, 0x1111, small.SGE(0, 64))
	if err := rc.PostRecv(qp); err != nil {
		t.Fatalf("PostRecv: %v", err)
	}
	p.Barrier("receive posted")

	sc := testkit.SendChain(t, rdmaWRs, 1)
	read := func(what string) time.Duration {
		t.Helper()
		clear(local.Bytes())
		start := time.Now()
		v := sc.Reserve(rdmaWRs)
		for i := range rdmaWRs {
			v.SetRead(i, uint64(0x100+i), verbs.SendSignaled, local.SGE(i*rdmaChunk, rdmaChunk), peer.Addr+uint64(i*rdmaChunk), peer.RKey)
		}
		if err := sc.PostSend(qp); err != nil {
			t.Fatalf("%s: PostSend: %v", what, err)
		}
		mustOK(t, what, scq.reap(t, ctx, rdmaWRs, what), verbs.WCRDMARead)
		return time.Since(start)
	}

	readTime := read("RDMA reads")
	testkit.SameBytes(t, "the peer's region, RDMA-read", local.Bytes(), pattern(seedOf(p.PeerRole(), testRDMA, 0), rdmaRegion))
	if s := Sum(local.Bytes()); s != peer.Sum {
		t.Fatalf("RDMA-read SHA-256 %s, the peer has %s", s, peer.Sum)
	}

	Fill(local.Bytes(), seedOf(p.Role, testRDMA, 1))
	start := time.Now()
	v := sc.Reserve(rdmaWRs)
	for i := range rdmaWRs {
		sge, raddr := local.SGE(i*rdmaChunk, rdmaChunk), peer.Addr+uint64(i*rdmaChunk)
		if i == rdmaWRs-1 {
			v.SetWriteImm(i, uint64(0x200+i), verbs.SendSignaled, rdmaImm, sge, raddr, peer.RKey)
		} else {
			v.SetWrite(i, uint64(0x200+i), verbs.SendSignaled, sge, raddr, peer.RKey)
		}
	}
	if err := sc.PostSend(qp); err != nil {
		t.Fatalf("RDMA writes: PostSend: %v", err)
	}
	mustOK(t, "RDMA writes", scq.reap(t, ctx, rdmaWRs, "RDMA writes"), verbs.WCRDMAWrite)
	writeTime := time.Since(start)

	// The peer's write into this side's region, announced by its last WR.
	w := rcq.reap(t, ctx, 1, "the peer's RDMA write with immediate data")
	mustOK(t, "the peer's RDMA write with immediate data", w, verbs.WCRecvRDMAWithImm)
	if imm, ok := w[0].Imm(); !ok || imm != rdmaImm || w[0].WRID() != 0x1111 {
		t.Fatalf("write-with-immediate completion: wr_id %#x imm %#x (%v), want %#x and %#x", w[0].WRID(), imm, ok, 0x1111, rdmaImm)
	}
	testkit.SameBytes(t, "this side's region after the peer's RDMA writes", region.Bytes(), pattern(seedOf(p.PeerRole(), testRDMA, 1), rdmaRegion))
	var written string
	p.Exchange("written", Sum(local.Bytes()), &written)
	if s := Sum(region.Bytes()); s != written {
		t.Fatalf("this side's region has SHA-256 %s, the peer wrote %s", s, written)
	}

	want := append([]byte(nil), local.Bytes()...)
	backTime := read("RDMA reads back")
	testkit.SameBytes(t, "the peer's region read back after the RDMA writes", local.Bytes(), want)
	p.Barrier("read back") // the peer may still be reading this side's region
	t.Logf("RDMA read %d bytes in %d WRs in %v (%s), verified byte for byte and by SHA-256; RDMA write %d bytes in %v (%s), "+
		"verified by the peer; read back in %v; the peer's write into this side's %d bytes verified byte for byte and by SHA-256",
		rdmaRegion, rdmaWRs, readTime.Round(time.Millisecond), rate(rdmaRegion, readTime.Seconds()),
		rdmaRegion, writeTime.Round(time.Millisecond), rate(rdmaRegion, writeTime.Seconds()), backTime.Round(time.Millisecond), rdmaRegion)
}
