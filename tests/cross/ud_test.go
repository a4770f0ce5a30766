package cross

import (
	"fmt"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

const udQKey = 0x11111111

// udEndpoint is what a UD sender needs of its receiver.
type udEndpoint struct {
	QPN  uint32
	QKey uint32
	GID  hand.GID
}

// UD across the hosts, both ways at once: each side sends datagrams of 1
// byte to the path MTU through an address handle built from the peer's
// GID (the RoCE v2 IPv4 GID of its address, GID index 1). Each datagram
// lands 40 bytes into its receive buffer, after the GRH area, whose last
// 20 bytes hold the IPv4 header from the peer's address to this host's;
// byte_len counts the 40 bytes; the completion names the peer's QP; the
// bytes after the payload are untouched.
func TestCrossUD(t *testing.T) {
	p := ConnectPeer(t)
	ctx := p.Context()
	r := openRig(t, p)
	scq, rcq := r.cq(t, 16), r.cq(t, 16)
	qp := r.qp(t, hand.UD, scq, rcq, 16)
	if err := qp.ReadyUD(1, udQKey, hand.RandomPSN()); err != nil {
		t.Fatalf("QP.ReadyUD: %v", err)
	}
	pa, err := r.ctx.QueryPort(1)
	if err != nil {
		t.Fatalf("QueryPort: %v", err)
	}
	mtu := 128 << pa.ActiveMTU
	lens := []int{1, 2, 40, 100, 513, 1000, mtu - 1, mtu}
	slot := hand.GRHSize + mtu

	var peer udEndpoint
	p.Exchange("UD endpoint", udEndpoint{QPN: qp.Num(), QKey: udQKey, GID: r.gid}, &peer)
	if peer.GID != hand.GIDFromAddr(p.PeerAddr) {
		t.Fatalf("the peer's GID is %v, want the RoCE v2 GID of %v", peer.GID, p.PeerAddr)
	}
	ah, err := r.pd.NewAH(hand.Path{DGID: peer.GID, SGIDIndex: p.GIDIndex})
	if err != nil {
		t.Fatalf("NewAH(%v): %v", peer.GID, err)
	}
	testkit.CloseLater(t, "the AH", ah)

	bufs := r.mr(t, 2*len(lens)*slot) // receive slots, then send slots
	buf := bufs.Bytes()
	Fill(buf[:len(lens)*slot], seedOf(p.Role, testUD, 1000))
	before := append([]byte(nil), buf[:len(lens)*slot]...)
	rc := testkit.RecvChain(t, len(lens), 1)
	rv := rc.Reserve(len(lens))
	for i := range lens {
		rv.Set(i, uint64(0x100+i), hand.UDRecvSGE(bufs.Addr()+uint64(i*slot), uint32(mtu), bufs.LKey()))
	}
	if err := rc.PostRecv(qp); err != nil {
		t.Fatalf("PostRecv: %v", err)
	}
	p.Barrier("receives posted")

	start := time.Now()
	sc := testkit.SendChain(t, len(lens), 1)
	sv := sc.Reserve(len(lens))
	for i, n := range lens {
		off := (len(lens) + i) * slot
		Fill(buf[off:off+n], seedOf(p.Role, testUD, i))
		if i == 2 {
			sv.SetUDImm(i, uint64(0x200+i), verbs.SendSignaled, 0xfeedface, bufs.SGE(off, n), ah, peer.QPN, peer.QKey)
		} else {
			sv.SetUD(i, uint64(0x200+i), verbs.SendSignaled, bufs.SGE(off, n), ah, peer.QPN, peer.QKey)
		}
	}
	if err := sc.PostSend(qp); err != nil {
		t.Fatalf("PostSend: %v", err)
	}
	mustOK(t, "UD sends", scq.reap(t, ctx, len(lens), "UD sends"), verbs.WCSend)
	recvs := rcq.reap(t, ctx, len(lens), "UD receives")
	mustOK(t, "UD receives", recvs, verbs.WCRecv)
	elapsed := time.Since(start)

	var got int
	for i, n := range lens {
		w := &recvs[i]
		if w.WRID() != uint64(0x100+i) || int(w.ByteLen()) != hand.GRHSize+n || !w.HasGRH() || w.SrcQP() != peer.QPN || w.QPNum() != qp.Num() {
			t.Fatalf("UD receive %d: wr_id %#x byte_len %d GRH %v src_qp %d qp %d; want %#x, %d, true, %d, %d (datagrams from one QP arrive in order here)",
				i, w.WRID(), w.ByteLen(), w.HasGRH(), w.SrcQP(), w.QPNum(), 0x100+i, hand.GRHSize+n, peer.QPN, qp.Num())
		}
		imm, ok := w.Imm()
		if want := i == 2; ok != want || (ok && imm != 0xfeedface) {
			t.Fatalf("UD receive %d: immediate data %#x (%v), want %v", i, imm, ok, want)
		}
		s := buf[i*slot : (i+1)*slot]
		grh, payload, err := hand.SplitUD(s, w)
		if err != nil || grh == nil {
			t.Fatalf("SplitUD(receive %d): GRH %v, %v", i, grh, err)
		}
		if &payload[0] != &s[40] {
			t.Fatalf("receive %d: the payload does not start at byte 40 of the buffer", i)
		}
		testkit.SameBytes(t, fmt.Sprintf("datagram %d (%d bytes) from the %s", i, n, p.PeerRole()), payload, pattern(seedOf(p.PeerRole(), testUD, i), n))
		testkit.SameBytes(t, fmt.Sprintf("buffer %d after the payload", i), s[hand.GRHSize+n:], before[i*slot+hand.GRHSize+n:(i+1)*slot])
		// RoCE v2 over IPv4: bytes 20..39 of the GRH area are the IPv4 header.
		ip := s[20:40]
		if ip[0] != 0x45 || netip.AddrFrom4([4]byte(ip[12:16])) != p.PeerAddr || netip.AddrFrom4([4]byte(ip[16:20])) != p.Addr {
			t.Fatalf("receive %d: GRH area bytes 20..39 % x: want an IPv4 header from %v to %v", i, ip, p.PeerAddr, p.Addr)
		}
		got += n
	}
	t.Logf("UD (path MTU %d): %d datagrams of 1 to %d bytes sent and %d (%d payload bytes) received through an AH to %v, "+
		"each verified byte for byte at byte 40 after an IPv4 GRH area from %v, in %v",
		mtu, len(lens), mtu, len(recvs), got, peer.GID, p.PeerAddr, elapsed.Round(time.Millisecond))
}
