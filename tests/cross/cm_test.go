package cross

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

const (
	cmMsgs   = 64        // messages each way
	cmSlot   = 4096      // bytes per receive buffer, and the largest message
	cmRegion = 256 << 10 // the server's region the client reads and writes
	cmChunk  = cmRegion / 8
)

// cmSide is one end of the rdma_cm connection and its resources.
type cmSide struct {
	conn     *hand.Conn
	r        *rig
	scq, rcq *cq
	bufs     *hand.MR // cmMsgs receive slots, then cmMsgs send slots
}

// rdma_cm across the hosts: the server listens on its address
// (hand.Listen, port 0) and tells the client the port; the client dials
// (hand.Dial) with private data, the server checks it and accepts
// (ConnRequest.Accept) with private data naming a region of its memory.
// Both sides made their PD, CQs and MRs on librdmacm's context (the
// request's on the server, CMContext on the client). Then 64 messages each
// way at once through the rdma_post_sendv and rdma_post_recvv fast paths,
// checked byte for byte; the client reads the server's region with
// rdma_post_readv and overwrites it with rdma_post_writev, and the server
// checks its region byte for byte and by SHA-256. The client disconnects
// and the server sees it; both QPs end in ERR.
func TestCrossCM(t *testing.T) {
	p := ConnectPeer(t)
	if p.IsServer() {
		cmServer(t, p)
	} else {
		cmClient(t, p)
	}
}

func cmServer(t *testing.T, p *Peer) {
	ctx := p.Context()
	l, err := hand.Listen(ctx, netip.AddrPortFrom(p.Addr, 0).String())
	if err != nil {
		t.Fatalf("hand.Listen(%v:0): %v", p.Addr, err)
	}
	testkit.CloseLater(t, "the listener", l)
	if l.Addr().Addr() != p.Addr || l.Addr().Port() == 0 {
		t.Fatalf("listener bound to %v, want %v and a port", l.Addr(), p.Addr)
	}
	p.Send("listener", l.Addr().String())

	req, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("Listener.Accept: %v", withCause(ctx, err))
	}
	start := time.Now()
	var reqData []byte
	p.Recv("request data", &reqData)
	checkPrivateData(t, "the request's private data", req.PrivateData(), reqData, 56)
	if got := req.RemoteAddr().Addr(); got != p.PeerAddr {
		t.Errorf("the request comes from %v, want the client host's %v", got, p.PeerAddr)
	}

	s := &cmSide{r: rigOn(t, p, req.Context())}
	s.scq, s.rcq = s.r.cq(t, 2*cmMsgs), s.r.cq(t, 2*cmMsgs)
	s.bufs = s.r.mr(t, 2*cmMsgs*cmSlot)
	region := s.r.mr(t, cmRegion)
	Fill(region.Bytes(), seedOf(Server, testCM, 0))
	reg := regionMsg{RegionOf(region), Sum(region.Bytes())}
	acceptData := binary.LittleEndian.AppendUint64(nil, reg.Addr)
	acceptData = binary.LittleEndian.AppendUint32(acceptData, reg.RKey)
	acceptData = binary.LittleEndian.AppendUint32(acceptData, uint32(reg.Len))
	acceptData = fmt.Appendf(acceptData, "welcome from host %s at %v", p.Name, p.Addr)

	s.conn, err = req.Accept(ctx, hand.ConnConfig{PD: s.r.pd, SendCQ: s.scq.CQ, RecvCQ: s.rcq.CQ,
		Caps: hand.QPCaps{MaxSendWR: cmMsgs, MaxRecvWR: cmMsgs}, PrivateData: acceptData})
	if err != nil {
		t.Fatalf("ConnRequest.Accept: %v", withCause(ctx, err))
	}
	testkit.CloseLater(t, "the server's Conn", s.conn)
	t.Logf("accepted %v -> %v on %s in %v: QP %d, private data %d bytes in, %d out",
		s.conn.RemoteAddr(), s.conn.LocalAddr(), s.conn.Context().Name(), time.Since(start).Round(time.Millisecond),
		s.conn.QP().Num(), len(reqData), len(acceptData))
	p.Send("accept data", acceptData)
	p.Send("region", reg)
	checkConn(t, p, s.conn)

	s.exchange(t, p)

	var written string
	p.Recv("written", &written)
	testkit.SameBytes(t, "the region after the client's rdma_post_writev", region.Bytes(), pattern(seedOf(Client, testCM, 0), cmRegion))
	if got := Sum(region.Bytes()); got != written {
		t.Fatalf("the region's SHA-256 is %s, the client wrote %s", got, written)
	}
	t.Logf("the client's RDMA write of %d bytes verified byte for byte, SHA-256 %.16s...", cmRegion, written)

	start = time.Now()
	if err := s.conn.WaitDisconnect(ctx); err != nil {
		t.Fatalf("WaitDisconnect: %v", withCause(ctx, err))
	}
	t.Logf("the client disconnected; seen after %v", time.Since(start).Round(time.Millisecond))
	testkit.CheckState(t, s.conn.QP(), verbs.QPSErr)
}

func cmClient(t *testing.T, p *Peer) {
	ctx := p.Context()
	var addr string
	p.Recv("listener", &addr)
	cmctx, err := hand.CMContext(p.Device)
	if err != nil {
		t.Fatalf("hand.CMContext(%s): %v", p.Device, err)
	}
	testkit.CloseLater(t, "librdmacm's device context", cmctx)
	s := &cmSide{r: rigOn(t, p, cmctx)}
	s.scq, s.rcq = s.r.cq(t, 2*cmMsgs), s.r.cq(t, 2*cmMsgs)
	s.bufs = s.r.mr(t, 2*cmMsgs*cmSlot)
	local := s.r.mr(t, cmRegion)

	reqData := fmt.Appendf(nil, "hello from host %s at %v", p.Name, p.Addr)
	p.Send("request data", reqData)
	start := time.Now()
	s.conn, err = hand.Dial(ctx, addr, hand.ConnConfig{PD: s.r.pd, SendCQ: s.scq.CQ, RecvCQ: s.rcq.CQ,
		Caps: hand.QPCaps{MaxSendWR: cmMsgs, MaxRecvWR: cmMsgs}, PrivateData: reqData})
	if err != nil {
		t.Fatalf("hand.Dial(%s): %v", addr, withCause(ctx, err))
	}
	testkit.CloseLater(t, "the client's Conn", s.conn)
	t.Logf("dialled %v -> %v on %s in %v: QP %d", s.conn.LocalAddr(), s.conn.RemoteAddr(), s.conn.Context().Name(),
		time.Since(start).Round(time.Millisecond), s.conn.QP().Num())
	var acceptData []byte
	var reg regionMsg
	p.Recv("accept data", &acceptData)
	p.Recv("region", &reg)
	got := s.conn.PeerPrivateData()
	checkPrivateData(t, "the accept's private data", got, acceptData, 196)
	if a, k, n := binary.LittleEndian.Uint64(got), binary.LittleEndian.Uint32(got[8:]), binary.LittleEndian.Uint32(got[12:]); a != reg.Addr || k != reg.RKey || int(n) != reg.Len {
		t.Fatalf("the accept names region %#x rkey %#x len %d; the control channel %+v", a, k, n, reg.Region)
	}
	if s.conn.RemoteAddr().String() != addr {
		t.Errorf("connected to %v, dialled %s", s.conn.RemoteAddr(), addr)
	}
	checkConn(t, p, s.conn)

	s.exchange(t, p)

	// rdma_post_readv of the server's region, in chunks, then
	// rdma_post_writev of a new pattern over it.
	sc := testkit.SendChain(t, cmRegion/cmChunk, 1)
	start = time.Now()
	v := sc.Reserve(cmRegion / cmChunk)
	for i := range v.Len() {
		v.SetRead(i, uint64(0x3000+i), verbs.SendSignaled, local.SGE(i*cmChunk, cmChunk), reg.Addr+uint64(i*cmChunk), reg.RKey)
	}
	if err := sc.PostReadv(s.conn); err != nil {
		t.Fatalf("rdma_post_readv chain: %v", err)
	}
	mustOK(t, "RDMA reads", s.scq.reap(t, ctx, cmRegion/cmChunk, "RDMA reads"), verbs.WCRDMARead)
	readTime := time.Since(start)
	testkit.SameBytes(t, "the server's region read with rdma_post_readv", local.Bytes(), pattern(seedOf(Server, testCM, 0), cmRegion))
	if got := Sum(local.Bytes()); got != reg.Sum {
		t.Fatalf("read SHA-256 %s, the server has %s", got, reg.Sum)
	}

	Fill(local.Bytes(), seedOf(Client, testCM, 0))
	start = time.Now()
	v = sc.Reserve(cmRegion / cmChunk)
	for i := range v.Len() {
		v.SetWrite(i, uint64(0x4000+i), verbs.SendSignaled, local.SGE(i*cmChunk, cmChunk), reg.Addr+uint64(i*cmChunk), reg.RKey)
	}
	if err := sc.PostWritev(s.conn); err != nil {
		t.Fatalf("rdma_post_writev chain: %v", err)
	}
	mustOK(t, "RDMA writes", s.scq.reap(t, ctx, cmRegion/cmChunk, "RDMA writes"), verbs.WCRDMAWrite)
	writeTime := time.Since(start)
	p.Send("written", Sum(local.Bytes()))
	t.Logf("rdma_post_readv: %d bytes in %d WRs in %v (%s), verified byte for byte and by SHA-256; rdma_post_writev: %d bytes in %v (%s)",
		cmRegion, cmRegion/cmChunk, readTime.Round(time.Millisecond), rate(cmRegion, readTime.Seconds()),
		cmRegion, writeTime.Round(time.Millisecond), rate(cmRegion, writeTime.Seconds()))

	start = time.Now()
	if err := s.conn.Disconnect(ctx); err != nil {
		t.Fatalf("Disconnect: %v", withCause(ctx, err))
	}
	t.Logf("disconnected in %v", time.Since(start).Round(time.Millisecond))
	testkit.CheckState(t, s.conn.QP(), verbs.QPSErr)
}

// exchange sends cmMsgs messages to the peer with rdma_post_sendv while
// the peer does the same, into receives posted with rdma_post_recvv, and
// checks every received byte.
func (s *cmSide) exchange(t *testing.T, p *Peer) {
	t.Helper()
	ctx := p.Context()
	buf := s.bufs.Bytes()
	rc := testkit.RecvChain(t, cmMsgs, 1)
	v := rc.Reserve(cmMsgs)
	for i := range cmMsgs {
		v.Set(i, uint64(0x1000+i), s.bufs.SGE(i*cmSlot, cmSlot))
	}
	if err := rc.PostRecvv(s.conn); err != nil {
		t.Fatalf("rdma_post_recvv chain: %v", err)
	}
	p.Barrier("receives posted")

	start := time.Now()
	sc := testkit.SendChain(t, cmMsgs, 1)
	sv := sc.Reserve(cmMsgs)
	var sent int64
	for i := range cmMsgs {
		off, n := (cmMsgs+i)*cmSlot, msgSize(i, cmSlot)
		Fill(buf[off:off+n], seedOf(p.Role, testCM, 1+i))
		sv.SetSend(i, uint64(0x2000+i), verbs.SendSignaled, s.bufs.SGE(off, n))
		sent += int64(n)
	}
	if err := sc.PostSendv(s.conn); err != nil {
		t.Fatalf("rdma_post_sendv chain: %v", err)
	}
	sends := s.scq.reap(t, ctx, cmMsgs, "sends")
	mustOK(t, "sends", sends, verbs.WCSend)
	recvs := s.rcq.reap(t, ctx, cmMsgs, "receives")
	mustOK(t, "receives", recvs, verbs.WCRecv)
	elapsed := time.Since(start)
	var got int64
	for i := range recvs {
		w := &recvs[i]
		n := msgSize(i, cmSlot)
		if w.WRID() != uint64(0x1000+i) || int(w.ByteLen()) != n {
			t.Fatalf("receive %d: wr_id %#x byte_len %d, want %#x and %d (RC receives complete in order)", i, w.WRID(), w.ByteLen(), 0x1000+i, n)
		}
		testkit.SameBytes(t, fmt.Sprintf("message %d from the %s", i, p.PeerRole()), buf[i*cmSlot:i*cmSlot+n], pattern(seedOf(p.PeerRole(), testCM, 1+i), n))
		got += int64(n)
	}
	for i := range sends {
		if w := &sends[i]; w.WRID() != uint64(0x2000+i) {
			t.Fatalf("send completion %d: wr_id %#x, want %#x", i, w.WRID(), 0x2000+i)
		}
	}
	t.Logf("rdma_post_sendv/recvv: %d messages (%d bytes) sent and %d (%d bytes) received and verified byte for byte in %v (%s both ways)",
		cmMsgs, sent, len(recvs), got, elapsed.Round(time.Millisecond), rate(sent+got, elapsed.Seconds()))
}

// checkPrivateData checks that private data as the peer received it is
// what was sent, padded with zeros to the transport's size.
func checkPrivateData(t *testing.T, what string, got, sent []byte, size int) {
	t.Helper()
	if len(got) != size || !bytes.HasPrefix(got, sent) || len(bytes.TrimRight(got, "\x00")) > len(sent) {
		t.Fatalf("%s: %d bytes %q, want the %d bytes sent (%q) padded with zeros to %d", what, len(got), got, len(sent), sent, size)
	}
}

// checkConn checks a Conn's addresses against the hosts' and its QP's state.
func checkConn(t *testing.T, p *Peer, c *hand.Conn) {
	t.Helper()
	if c.LocalAddr().Addr() != p.Addr || c.RemoteAddr().Addr() != p.PeerAddr {
		t.Errorf("Conn %v -> %v, want %v -> %v", c.LocalAddr(), c.RemoteAddr(), p.Addr, p.PeerAddr)
	}
	if c.QP().Raw() != c.Raw().QP {
		t.Errorf("Conn.QP is not the rdma_cm id's QP")
	}
	testkit.CheckState(t, c.QP(), verbs.QPSRts)
}
