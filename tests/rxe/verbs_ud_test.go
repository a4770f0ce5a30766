package rxe

import (
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"net/netip"
	"os"
	"strconv"
	"testing"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// UD datagrams through an AH made from the device's RoCE v2 GID: each
// lands 40 bytes into its receive buffer (the GRH area, which for RoCE v2
// over IPv4 holds the IPv4 header in its last 20 bytes), byte_len counts
// the 40 bytes, the completion names the sending QP, and immediate data
// comes through. A datagram with the wrong Q_Key is dropped: the next
// receive buffer gets the next good datagram.
func TestVerbsUD(t *testing.T) {
	const (
		qkey = 0x11111111
		slot = 4096
	)
	e := openVerbs(t)
	addr, err := netip.ParseAddr(os.Getenv("RXE_ADDR"))
	if err != nil || !addr.Is4() {
		t.Fatalf("RXE_ADDR=%q is not an IPv4 address: run under internal/cmd/rxevm, which sets it", os.Getenv("RXE_ADDR"))
	}
	acq, bcq := e.cq(t, 16), e.cq(t, 16)
	a := e.qp(t, vQPConfig{typ: verbs.QPTUD, send: acq, recv: acq, sendWR: 8, recvWR: 8})
	b := e.qp(t, vQPConfig{typ: verbs.QPTUD, send: bcq, recv: bcq, sendWR: 8, recvWR: 8})
	readyUD(t, a, qkey)
	readyUD(t, b, qkey)

	attr := e.route()
	ah, err := verbs.CreateAH(e.pd, &attr)
	if err != nil {
		t.Fatalf("ibv_create_ah(dgid %v, sgid index %d): %v", netip.AddrFrom16(*attr.GRH.DGID.Raw()), e.gidIndex, err)
	}
	t.Cleanup(func() {
		if err := verbs.DestroyAH(ah); err != nil {
			t.Errorf("ibv_destroy_ah: %v", err)
		}
	})

	// The largest UD payload is the path MTU.
	mtu := 128 << e.port.ActiveMTU
	lens := []int{1, 100, 513, mtu}
	src, dst := e.mr(t, 8*slot), e.mr(t, 8*slot)
	fill(src.buf, 9)
	fill(dst.buf, 0x44)

	rc := testkit.RecvChain(t, len(lens), 1)
	rv := rc.Reserve(len(lens))
	for i := range lens {
		rv.Set(i, uint64(400+i), hand.UDRecvSGE(dst.addr(i*slot), uint32(mtu), dst.mr.LKey))
	}
	if err := rc.PostRecvRaw(b); err != nil {
		t.Fatalf("post UD receives: %v", err)
	}
	sc := testkit.SendChain(t, len(lens)+1, 1)
	sv := sc.Reserve(len(lens) + 1)
	sv.SetUDRaw(0, 500, verbs.SendSignaled, src.sge(0, lens[0]), ah, b.QPNum, qkey)
	sv.SetUDRaw(1, 501, verbs.SendSignaled, src.sge(slot, 77), ah, b.QPNum, qkey+1) // wrong Q_Key: dropped
	sv.SetUDImmRaw(2, 502, verbs.SendSignaled, 0xfeedface, src.sge(2*slot, lens[1]), ah, b.QPNum, qkey)
	sv.SetUDRaw(3, 503, verbs.SendSignaled, src.sge(3*slot, lens[2]), ah, b.QPNum, qkey)
	sv.SetUDRaw(4, 504, verbs.SendSignaled, src.sge(4*slot, lens[3]), ah, b.QPNum, qkey)
	if err := sc.PostSendRaw(a); err != nil {
		t.Fatalf("post UD sends: %v", err)
	}
	from := []int{0, 2 * slot, 3 * slot, 4 * slot}

	r := bcq.reap(t, len(lens))
	mustOK(t, r)
	for i := range r {
		w := &r[i]
		if w.WRID() != uint64(400+i) || w.Opcode() != verbs.WCRecv || int(w.ByteLen()) != hand.GRHSize+lens[i] ||
			!w.HasGRH() || w.SrcQP() != a.QPNum || w.QPNum() != b.QPNum {
			t.Fatalf("UD receive %d: wr_id %d opcode %d byte_len %d GRH %v src_qp %d qp %d; want %d RECV %d true %d %d",
				i, w.WRID(), w.Opcode(), w.ByteLen(), w.HasGRH(), w.SrcQP(), w.QPNum(),
				400+i, hand.GRHSize+lens[i], a.QPNum, b.QPNum)
		}
		imm, ok := w.Imm()
		if wantImm := i == 1; ok != wantImm || (ok && imm != 0xfeedface) {
			t.Fatalf("UD receive %d: imm %#x (%v), want %v", i, imm, ok, wantImm)
		}
		buf := dst.buf[i*slot : i*slot+hand.GRHSize+mtu]
		grh, payload, err := hand.SplitUD(buf, w)
		if err != nil || grh == nil {
			t.Fatalf("hand.SplitUD(receive %d): grh %v, err %v", i, grh, err)
		}
		if &payload[0] != &dst.buf[i*slot+40] {
			t.Fatalf("receive %d: payload does not start 40 bytes into the buffer", i)
		}
		testkit.SameBytes(t, "UD payload "+strconv.Itoa(i), payload, src.buf[from[i]:from[i]+lens[i]])
		testkit.SameBytes(t, "after UD payload "+strconv.Itoa(i), buf[hand.GRHSize+lens[i]:], shiftedFill(0x44, i*slot+hand.GRHSize+lens[i], mtu-lens[i]))
		// RoCE v2 over IPv4: bytes 20..39 of the GRH area are the IPv4 header.
		ip := buf[20:40]
		if ip[0] != 0x45 || netip.AddrFrom4([4]byte(ip[12:16])) != addr || netip.AddrFrom4([4]byte(ip[16:20])) != addr {
			t.Fatalf("receive %d: GRH area bytes 20..39 % x: want an IPv4 header from %v to %v", i, ip, addr, addr)
		}
	}
	s := acq.reap(t, len(lens)+1)
	mustOK(t, s) // UD sends complete when sent, whether or not anyone takes them
	bcq.expectEmpty(t)
}
