package rxe

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cmem"
	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// The helpers beside the generated stubs, on the VM's device: the device
// list, registration of C memory, completion events, socket addresses and
// rdma_set_option, used as a program that imports only the generated
// packages and cmem uses them (the host's tests, in generated/verbs,
// generated/rdmacm and cmem, cover what needs no device).

// verbs.Devices lists the VM's device with C's list behind it; a device
// opened from the list stays valid after Free, with its name and its
// firmware version read from C's char arrays by cmem.ArrayString.
func TestHelpersDevices(t *testing.T) {
	name, _ := RequireDevice(t)
	devs, err := verbs.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if cap(devs) != len(devs)+1 || devs[:cap(devs)][len(devs)] != nil {
		devs.Free()
		t.Fatalf("verbs.Devices: len %d, cap %d: the list does not end with C's NULL at len", len(devs), cap(devs))
	}
	var mine *verbs.Device
	for _, d := range devs {
		if got, want := cmem.ArrayString(d.Name[:]), cmem.GoString(verbs.GetDeviceName(d)); got != want {
			t.Errorf("struct ibv_device.name %q, ibv_get_device_name %q", got, want)
		}
		if cmem.ArrayString(d.Name[:]) == name {
			mine = d
		}
	}
	if mine == nil {
		devs.Free()
		t.Fatalf("%s is not in verbs.Devices (%d devices)", name, len(devs))
	}
	ctx, err := verbs.OpenDevice(mine)
	devs.Free()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := verbs.CloseDevice(ctx); err != nil {
			t.Error(err)
		}
	}()
	if got := cmem.ArrayString(ctx.Device.Name[:]); got != name {
		t.Errorf("after Free, the open context's device is %q, want %q", got, name)
	}
	var attr verbs.DeviceAttr
	if err := verbs.QueryDevice(ctx, &attr); err != nil {
		t.Fatal(err)
	}
	fw := cmem.ArrayString(attr.FWVer[:])
	if fw == "" {
		t.Error("ibv_query_device: empty fw_ver")
	}
	t.Logf("%s: firmware %q", name, fw)
}

// A message from one QP of an RC pair to the other with the generated
// packages and cmem alone: buffers, work requests, SGEs and the completion
// in C memory, the buffers registered with RegMRSlice, the SGEs' addresses
// from cmem.Addr, the completion waited for with CQEvent and reaped with
// PollCQ.
func TestHelpersMessage(t *testing.T) {
	e := openVerbs(t)
	p := e.rcPair(t, 4, 1)
	const size = 3000
	src, dst := cmem.NewSlice[byte](size), cmem.NewSlice[byte](size)
	t.Cleanup(func() { cmem.FreeSlice(src); cmem.FreeSlice(dst) }) // after the MRs' deregistration: cleanups run last first
	fill(src, 21)
	reg := func(buf []byte) *verbs.MR {
		mr, err := verbs.RegMRSlice(e.pd, buf, verbs.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := verbs.DeregMR(mr); err != nil {
				t.Error(err)
			}
		})
		if mr.Length != uint64(len(buf)) || uint64(uintptr(mr.Addr)) != cmem.Addr(buf) {
			t.Fatalf("RegMRSlice: MR at %#x, %d bytes; want %#x, %d", uintptr(mr.Addr), mr.Length, cmem.Addr(buf), len(buf))
		}
		return mr
	}
	smr, dmr := reg(src), reg(dst)
	if _, err := verbs.RegMRSlice(e.pd, dst[:0], verbs.AccessLocalWrite); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("RegMRSlice of an empty buffer: %v, want EINVAL", err)
	}

	recv, rsge := cmem.New[verbs.RecvWR](), cmem.New[verbs.SGE]()
	send, ssge := cmem.New[verbs.SendWR](), cmem.New[verbs.SGE]()
	wc := cmem.New[verbs.WC]()
	t.Cleanup(func() { cmem.Free(recv); cmem.Free(rsge); cmem.Free(send); cmem.Free(ssge); cmem.Free(wc) })
	*rsge = verbs.SGE{Addr: cmem.Addr(dst), Length: size, LKey: dmr.LKey}
	recv.WRID, recv.SGList, recv.NumSGE = 31, rsge, 1
	*ssge = verbs.SGE{Addr: cmem.Addr(src), Length: size, LKey: smr.LKey}
	send.WRID, send.SGList, send.NumSGE, send.Opcode = 32, ssge, 1, verbs.WROpSend // unsignaled: only the receive completes

	var badRecv *verbs.RecvWR
	if err := verbs.PostRecv(p.b, recv, &badRecv); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ReqNotifyCQ(p.bcq.cq, 0); err != nil {
		t.Fatal(err)
	}
	var badSend *verbs.SendWR
	if err := verbs.PostSend(p.a, send, &badSend); err != nil {
		t.Fatal(err)
	}
	if err := waitReadable(p.bcq.ch.FD, time.Now().Add(vTimeout)); err != nil {
		t.Fatalf("no completion event: %v", err)
	}
	cq, err := verbs.CQEvent(p.bcq.ch)
	if err != nil || cq != p.bcq.cq {
		t.Fatalf("CQEvent: %p, %v; want %p", cq, err, p.bcq.cq)
	}
	verbs.ACKCQEvents(cq, 1)
	n, err := verbs.PollCQ(cq, 1, wc)
	if err != nil || n != 1 || wc.Status != verbs.WCSuccess || wc.WRID != 31 || wc.ByteLen != size {
		t.Fatalf("PollCQ: %d, %v: status %d, wr_id %d, %d bytes; want 1 success, wr_id 31, %d bytes",
			n, err, wc.Status, wc.WRID, wc.ByteLen, size)
	}
	if !bytes.Equal(dst, src) {
		t.Error("the received bytes differ from the sent")
	}
}

// rdmacm.SockaddrOf's addresses bind and resolve a real rdma_cm id, which
// rdmacm.AddrPortOf reads back from librdmacm's copies; SetOptionValue
// passes what the kernel checks against each option's C type.
func TestHelpersCM(t *testing.T) {
	RequireDevice(t)
	addr, err := netip.ParseAddr(os.Getenv("RXE_ADDR"))
	if err != nil || !addr.Is4() {
		t.Fatalf("RXE_ADDR=%q is not an IPv4 address: run under internal/cmd/rxevm, which sets it", os.Getenv("RXE_ADDR"))
	}
	ch := cmChannel(t)

	id := cmID(t, ch)
	cmCall(t, "REUSEADDR int32", rdmacm.SetOptionValue(id, rdmacm.OptionID, rdmacm.OptionIDReuseaddr, int32(1)))
	cmCall(t, "TOS uint8", rdmacm.SetOptionValue(id, rdmacm.OptionID, rdmacm.OptionIDTos, uint8(32)))
	if err := rdmacm.SetOptionValue(id, rdmacm.OptionID, rdmacm.OptionIDTos, int32(32)); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("TOS as an int32 (optlen 4, not 1): %v, want EINVAL", err)
	}
	cmCall(t, "rdma_bind_addr", rdmacm.BindAddr(id, rdmacm.SockaddrOf(netip.AddrPortFrom(addr, 0))))
	local, err := rdmacm.AddrPortOf(rdmacm.GetLocalAddr(id))
	if err != nil || local.Addr() != addr || local.Port() == 0 {
		t.Errorf("rdma_get_local_addr after binding %s:0: %v, %v; want %s and the port rdma_cm chose", addr, local, err, addr)
	}

	id = cmID(t, ch)
	dst := netip.AddrPortFrom(addr, 7471)
	cmCall(t, "rdma_resolve_addr", rdmacm.ResolveAddr(id, nil, rdmacm.SockaddrOf(dst), 5000))
	cmExpect(t, ch, rdmacm.CMEventAddrResolved)
	if peer, err := rdmacm.AddrPortOf(rdmacm.GetPeerAddr(id)); err != nil || peer != dst {
		t.Errorf("rdma_get_peer_addr: %v, %v; want %s", peer, err, dst)
	}
	if src, err := rdmacm.AddrPortOf(id.Route.Addr.SrcAddr()); err != nil || src.Addr() != addr {
		t.Errorf("the resolved source: %v, %v; want %s", src, err, addr)
	}
}
