package rxe

// rdma_cm setup for cm_*_test.go, through the generated rdmacm stubs.

import (
	"encoding/binary"
	"net/netip"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// sockaddrIn is a struct sockaddr_in for ap (IPv4), in the opaque storage
// the generated package gives the C library's socket types.
func sockaddrIn(ap netip.AddrPort) rdmacm.Sockaddr {
	var sa rdmacm.Sockaddr
	b := (*[16]byte)(unsafe.Pointer(&sa))
	binary.NativeEndian.PutUint16(b[0:], syscall.AF_INET)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	a := ap.Addr().As4()
	copy(b[4:8], a[:])
	return sa
}

// cmChannel creates an rdma_cm event channel, destroyed when the test ends.
func cmChannel(t testing.TB) *rdmacm.EventChannel {
	t.Helper()
	ch, err := rdmacm.CreateEventChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdmacm.DestroyEventChannel(ch) })
	return ch
}

// cmID creates an RDMA_PS_TCP id on ch, destroyed when the test ends.
func cmID(t testing.TB, ch *rdmacm.EventChannel) *rdmacm.CMID {
	t.Helper()
	var id *rdmacm.CMID
	if err := rdmacm.CreateID(ch, &id, nil, rdmacm.PsTCP); err != nil {
		t.Fatal(err)
	}
	destroyIDLater(t, id)
	return id
}

// cmResolved creates an event channel and an id on it, destroyed when the
// test ends, and resolves the address and route to server (5 s each).
func cmResolved(t testing.TB, server netip.AddrPort) (*rdmacm.EventChannel, *rdmacm.CMID) {
	t.Helper()
	ch := cmChannel(t)
	id := cmID(t, ch)
	dst := sockaddrIn(server)
	cmCall(t, "rdma_resolve_addr", rdmacm.ResolveAddr(id, nil, &dst, 5000))
	cmExpect(t, ch, rdmacm.CMEventAddrResolved)
	cmCall(t, "rdma_resolve_route", rdmacm.ResolveRoute(id, 5000))
	cmExpect(t, ch, rdmacm.CMEventRouteResolved)
	return ch, id
}

func destroyIDLater(t testing.TB, id *rdmacm.CMID) {
	t.Cleanup(func() {
		if err := rdmacm.DestroyID(id); err != nil {
			t.Error(err)
		}
	})
}

// cmCall fails the test when an rdma_cm call (what) failed. The error is
// the generated stub's, which names the function and its errno; what says
// which call of the test it was.
func cmCall(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// cmEvent is what the tests keep of an rdma_cm event, copied before the
// event is acknowledged.
type cmEvent struct {
	typ         rdmacm.CMEventType
	status      int32
	id          *rdmacm.CMID
	privateData []byte
}

// cmExpect waits (in poll(2), up to vTimeout) for the next event on ch,
// acknowledges it and fails the test unless it is want with status 0.
func cmExpect(t testing.TB, ch *rdmacm.EventChannel, want rdmacm.CMEventType) cmEvent {
	t.Helper()
	if err := waitReadable(ch.FD, time.Now().Add(vTimeout)); err != nil {
		t.Fatalf("waiting for %s: %v", goString(rdmacm.EventStr(want)), err)
	}
	var ev *rdmacm.CMEvent
	cmCall(t, "rdma_get_cm_event", rdmacm.GetCMEvent(ch, &ev))
	got := cmEvent{typ: ev.Event, status: ev.Status, id: ev.ID}
	if conn := ev.Param.Conn(); conn.PrivateData != nil && conn.PrivateDataLen > 0 {
		got.privateData = append([]byte(nil), unsafe.Slice((*byte)(conn.PrivateData), conn.PrivateDataLen)...)
	}
	cmCall(t, "rdma_ack_cm_event", rdmacm.ACKCMEvent(ev))
	if got.typ != want || got.status != 0 {
		t.Fatalf("rdma_cm event %s (status %d), want %s", goString(rdmacm.EventStr(got.typ)), got.status, goString(rdmacm.EventStr(want)))
	}
	return got
}

// cmEnv wraps the device context an rdma_cm id is bound to in a vEnv with
// its own PD (the context belongs to librdmacm: the test does not close it).
func cmEnv(t testing.TB, id *rdmacm.CMID, gidIndex int) *vEnv {
	t.Helper()
	if id.Verbs == nil {
		t.Fatal("the rdma_cm id is bound to no device")
	}
	e := &vEnv{name: goStringArray(id.Verbs.Device.Name[:]), gidIndex: gidIndex, ctx: id.Verbs}
	e.setup(t)
	return e
}

// cmQP creates the id's RC QP (rdma_create_qp) on e's PD with cq for sends
// and receives, destroyed when the test ends.
func cmQP(t testing.TB, id *rdmacm.CMID, e *vEnv, cq *vCQ, wr, sge int) {
	t.Helper()
	attr := verbs.QPInitAttr{
		SendCQ: cq.cq,
		RecvCQ: cq.cq,
		QPType: verbs.QPTRC,
		Cap:    verbs.QPCap{MaxSendWR: uint32(wr), MaxRecvWR: uint32(wr), MaxSendSGE: uint32(sge), MaxRecvSGE: uint32(sge)},
	}
	cmCall(t, "rdma_create_qp", rdmacm.CreateQP(id, e.pd, &attr))
	t.Cleanup(func() { rdmacm.DestroyQP(id) })
	if id.QP == nil || id.QP.QPType != verbs.QPTRC || id.QP.SendCQ != cq.cq {
		t.Fatalf("rdma_create_qp: id.qp %p", id.QP)
	}
}
