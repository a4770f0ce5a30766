package rxe

import (
	"encoding/binary"
	"fmt"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"net/netip"
	"os"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// A server listening on RXE_ADDR and a client connecting to it, in one
// process, driven as one event loop over their two rdma_cm event channels.
// The server tells the client where its readable region is in the accept's
// private data. Then: client to server through rdma_post_sendv into
// rdma_post_recvv buffers (two scatter entries each), server to client the
// same way, the client reads the server's region with a chain of
// rdma_post_readv (one WR scattering into two buffers) and writes part of
// it back with rdma_post_writev; every byte is checked, every context comes
// back as the completion's wr_id. Then the client disconnects and both sides
// see it.
func TestCMPostRecvvReadv(t *testing.T) {
	_, gidIndex := RequireDevice(t)
	addr, err := netip.ParseAddr(os.Getenv("RXE_ADDR"))
	if err != nil || !addr.Is4() {
		t.Fatalf("RXE_ADDR=%q is not an IPv4 address: run under internal/cmd/rxevm, which sets it", os.Getenv("RXE_ADDR"))
	}

	// Listen on an ephemeral port.
	sch := cmChannel(t)
	lid := cmID(t, sch)
	bind := sockaddrIn(netip.AddrPortFrom(addr, 0))
	cmCall(t, "rdma_bind_addr", rdmacm.BindAddr(lid, &bind))
	cmCall(t, "rdma_listen", rdmacm.Listen(lid, 4))
	port := rdmacm.GetSrcPort(lid).Native()
	if port == 0 {
		t.Fatal("rdma_get_src_port: 0 after rdma_listen")
	}
	server := netip.AddrPortFrom(addr, port)

	// Client: resolve address and route, make its QP, pre-post receives,
	// connect.
	cch, cid := cmResolved(t, server)
	ce := cmEnv(t, cid, gidIndex)
	t.Logf("listening on %v; the client resolved it to device %s port %d", server, ce.name, cid.PortNum)
	if want := os.Getenv("RXE_DEVICE"); ce.name != want {
		t.Errorf("rdma_resolve_addr(%v) bound the client to %s, want %s", server, ce.name, want)
	}
	ccq := ce.cq(t, 32)
	cmQP(t, cid, ce, ccq, 16, 2)
	cmem := ce.mr(t, 1<<16)
	fill(cmem.buf, 20)

	const slot = 4096
	// Client receives land at 32 KiB: each message's first 100 bytes in
	// one buffer, the rest in another.
	crecv := testkit.RecvChain(t, 3, 2)
	v := crecv.Reserve(3)
	for i := range 3 {
		base := 32768 + i*2*slot
		v.SetSGL(i, uint64(0xc0000+i), []verbs.SGE{cmem.sge(base, 100), cmem.sge(base+slot, slot)})
	}
	if err := crecv.PostRecvvRaw(cid); err != nil {
		t.Fatalf("client rdma_post_recvv chain: %v", err)
	}
	cparam := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	cmCall(t, "rdma_connect", rdmacm.Connect(cid, &cparam))

	// Server: take the request, make the QP, pre-post receives, accept
	// with private data naming its readable region.
	req := cmExpect(t, sch, rdmacm.CMEventConnectRequest)
	sid := req.id
	destroyIDLater(t, sid)
	se := cmEnv(t, sid, gidIndex)
	scq := se.cq(t, 32)
	cmQP(t, sid, se, scq, 16, 2)
	smem := se.mr(t, 1<<16)
	fill(smem.buf, 21)
	srecv := testkit.RecvChain(t, 4, 2)
	v = srecv.Reserve(4)
	for i := range 4 {
		base := 32768 + i*2*slot
		v.SetSGL(i, uint64(0x50000+i), []verbs.SGE{smem.sge(base, 10), smem.sge(base+slot, slot)})
	}
	if err := srecv.PostRecvvRaw(sid); err != nil {
		t.Fatalf("server rdma_post_recvv chain: %v", err)
	}
	// The private data pointer sits inside struct rdma_conn_param: a Go
	// pointer there would be a Go pointer in memory passed to C, which
	// cgo forbids.
	pdata := mmapBuf(t, 4096)
	binary.LittleEndian.PutUint64(pdata[0:], smem.addr(0))
	binary.LittleEndian.PutUint32(pdata[8:], smem.mr.RKey)
	binary.LittleEndian.PutUint32(pdata[12:], 32768)
	sparam := rdmacm.ConnParam{
		PrivateData: unsafe.Pointer(&pdata[0]), PrivateDataLen: 16,
		ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7,
	}
	cmCall(t, "rdma_accept", rdmacm.Accept(sid, &sparam))
	est := cmExpect(t, cch, rdmacm.CMEventEstablished)
	cmExpect(t, sch, rdmacm.CMEventEstablished)
	if len(est.privateData) < 16 {
		t.Fatalf("ESTABLISHED carries %d bytes of private data, want the server's 16", len(est.privateData))
	}
	raddr := binary.LittleEndian.Uint64(est.privateData[0:])
	rkey := binary.LittleEndian.Uint32(est.privateData[8:])
	rlen := int(binary.LittleEndian.Uint32(est.privateData[12:]))
	if raddr != smem.addr(0) || rkey != smem.mr.RKey || rlen != 32768 {
		t.Fatalf("private data %x, want addr %#x rkey %#x len 32768", est.privateData[:16], smem.addr(0), smem.mr.RKey)
	}

	// Client to server: 4 sends gathered from two pieces each.
	csend := testkit.SendChain(t, 4, 2)
	sv := csend.Reserve(4)
	wantAtServer := make([][]byte, 4)
	for i := range 4 {
		n := 10 + i*1300 // the first buffer takes 10, the rest spills into the second
		a, b := i*8192, i*8192+4000
		sv.SetSend(i, uint64(0xc1000+i), verbs.SendSignaled, cmem.sge(a, 7))
		sv.SetSGL(i, []verbs.SGE{cmem.sge(a, 7), cmem.sge(b, n-7)})
		wantAtServer[i] = append(append([]byte(nil), cmem.buf[a:a+7]...), cmem.buf[b:b+n-7]...)
	}
	if err := csend.PostSendvRaw(cid); err != nil {
		t.Fatalf("client rdma_post_sendv chain: %v", err)
	}
	checkCMRecvs(t, scq, smem, 0x50000, 10, wantAtServer)
	checkIDs(t, "client sends", ccq.reap(t, 4), 0xc1000, verbs.WCSend)

	// Server to client: 3 sends, received into the client's pre-posted
	// buffers.
	ssend := testkit.SendChain(t, 3, 1)
	sv = ssend.Reserve(3)
	wantAtClient := make([][]byte, 3)
	for i := range 3 {
		n := 1 + i*2000
		sv.SetSend(i, uint64(0x51000+i), verbs.SendSignaled, smem.sge(i*100, n))
		wantAtClient[i] = smem.buf[i*100 : i*100+n]
	}
	if err := ssend.PostSendvRaw(sid); err != nil {
		t.Fatalf("server rdma_post_sendv chain: %v", err)
	}
	checkCMRecvs(t, ccq, cmem, 0xc0000, 100, wantAtClient)
	checkIDs(t, "server sends", scq.reap(t, 3), 0x51000, verbs.WCSend)

	// Client reads the server's first 32 KiB region with a chain of 3
	// rdma_post_readv, the first scattering into two buffers.
	clear(cmem.buf[:32768])
	rd := testkit.SendChain(t, 3, 2)
	sv = rd.Reserve(3)
	sv.SetRead(0, 0xc2000, verbs.SendSignaled, cmem.sge(0, 5000), raddr, rkey)
	sv.SetSGL(0, []verbs.SGE{cmem.sge(0, 5000), cmem.sge(5000, 11000)}) // [0, 16000)
	sv.SetRead(1, 0xc2001, verbs.SendSignaled, cmem.sge(16000, 16000), raddr+16000, rkey)
	sv.SetRead(2, 0xc2002, verbs.SendSignaled, cmem.sge(32000, rlen-32000), raddr+32000, rkey)
	if err := rd.PostReadvRaw(cid); err != nil {
		t.Fatalf("client rdma_post_readv chain: %v", err)
	}
	checkIDs(t, "client reads", ccq.reap(t, 3), 0xc2000, verbs.WCRDMARead)
	testkit.SameBytes(t, "the server's region read with rdma_post_readv", cmem.buf[:rlen], smem.buf[:rlen])

	// And writes bytes [1000, 3000), complemented, to the server's [20000, 22000).
	for i := range 2000 {
		cmem.buf[40000+i] = ^cmem.buf[1000+i]
	}
	wr := testkit.SendChain(t, 1, 1)
	wr.Reserve(1).SetWrite(0, 0xc3000, verbs.SendSignaled, cmem.sge(40000, 2000), raddr+20000, rkey)
	if err := wr.PostWritevRaw(cid); err != nil {
		t.Fatalf("client rdma_post_writev: %v", err)
	}
	checkIDs(t, "client write", ccq.reap(t, 1), 0xc3000, verbs.WCRDMAWrite)
	testkit.SameBytes(t, "the server's region after rdma_post_writev", smem.buf[20000:22000], cmem.buf[40000:42000])

	// The client disconnects (DREQ); the server sees it and answers
	// (DREP), which completes the client's disconnect. Every receive
	// posted was used: nothing is left to flush.
	cmCall(t, "client rdma_disconnect", rdmacm.Disconnect(cid))
	cmExpect(t, sch, rdmacm.CMEventDisconnected)
	cmCall(t, "server rdma_disconnect", rdmacm.Disconnect(sid))
	cmExpect(t, cch, rdmacm.CMEventDisconnected)
	ccq.expectEmpty(t)
	scq.expectEmpty(t)
}

// checkCMRecvs reaps len(want) receives whose contexts count up from
// first, each into a two-entry scatter list of firstLen bytes then the
// rest, laid out as the test posted them, and checks their bytes.
func checkCMRecvs(t *testing.T, cq *vCQ, m *vMR, first uint64, firstLen int, want [][]byte) {
	t.Helper()
	const slot = 4096
	w := cq.reap(t, len(want))
	mustOK(t, w)
	for i := range w {
		if w[i].WRID() != first+uint64(i) || w[i].Opcode() != verbs.WCRecv || int(w[i].ByteLen()) != len(want[i]) {
			t.Fatalf("receive %d: wr_id %#x opcode %d len %d, want %#x RECV len %d",
				i, w[i].WRID(), w[i].Opcode(), w[i].ByteLen(), first+uint64(i), len(want[i]))
		}
		base := 32768 + i*2*slot
		k := min(firstLen, len(want[i]))
		got := append(append([]byte(nil), m.buf[base:base+k]...), m.buf[base+slot:base+slot+len(want[i])-k]...)
		testkit.SameBytes(t, fmt.Sprintf("message %d through rdma_post_recvv", i), got, want[i])
	}
}

// checkIDs checks that completions are successful, of opcode op, with
// wr_ids (the rdma_post_*v contexts) counting up from first.
func checkIDs(t *testing.T, what string, w []hand.WC, first uint64, op verbs.WCOpcode) {
	t.Helper()
	mustOK(t, w)
	for i := range w {
		if w[i].WRID() != first+uint64(i) || w[i].Opcode() != op {
			t.Fatalf("%s: completion %d: wr_id %#x opcode %d, want %#x opcode %d", what, i, w[i].WRID(), w[i].Opcode(), first+uint64(i), op)
		}
	}
}
