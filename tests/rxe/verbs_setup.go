package rxe

// Setup for the verbs-level tests (verbs_*_test.go, cm_*_test.go): the
// device, PD, MRs, CQs, QPs and their state transitions, AHs and SRQs, made
// through the generated stubs directly (so the tests exercise package verbs
// as a user of it would), while posting and polling go through hand's fast
// paths. The stubs' errors name the C function and its errno, so the tests
// need no errno reader of their own.

import (
	"bytes"
	"fmt"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// vTimeout bounds every wait for a completion or an event. Under TCG a
// round trip takes a fraction of a millisecond; a test that waits this long
// has lost something.
const vTimeout = 30 * time.Second

// vPort is the port every test uses: rxe devices have one.
const vPort = 1

// goString copies a NUL-terminated C string.
func goString(p *int8) string {
	if p == nil {
		return ""
	}
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

// goStringArray is goString of a fixed-size char array.
func goStringArray(a []int8) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), len(a))
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// vEnv is the VM's device opened through the generated stubs, with one PD.
type vEnv struct {
	name     string
	gidIndex int
	ctx      *verbs.Context
	pd       *verbs.PD
	dev      verbs.DeviceAttr
	port     verbs.PortAttr
	gid      verbs.GID // the RoCE v2 IPv4 GID at gidIndex
}

// openVerbs opens the device RequireDevice names (skipping outside the VM),
// queries it and allocates a PD; all are released when the test ends.
func openVerbs(t testing.TB) *vEnv {
	t.Helper()
	tt, ok := t.(*testing.T)
	if !ok {
		t.Fatal("openVerbs needs a *testing.T")
	}
	name, gidIndex := RequireDevice(tt)
	e := &vEnv{name: name, gidIndex: gidIndex}

	var n int32
	list, err := verbs.GetDeviceList(&n)
	if err != nil {
		t.Fatal(err)
	}
	defer verbs.FreeDeviceList(list)
	for _, d := range unsafe.Slice(list, n) {
		if goString(verbs.GetDeviceName(d)) == name {
			e.ctx, err = verbs.OpenDevice(d)
			if e.ctx == nil {
				t.Fatalf("ibv_open_device(%s): %v", name, err)
			}
		}
	}
	if e.ctx == nil {
		t.Fatalf("device %s is not in ibv_get_device_list (%d devices)", name, n)
	}
	t.Cleanup(func() {
		if err := verbs.CloseDevice(e.ctx); err != nil {
			t.Errorf("ibv_close_device(%s): %d", name, err)
		}
	})
	e.setup(t)
	return e
}

// setup queries the opened device, port and GID and allocates the PD.
func (e *vEnv) setup(t testing.TB) {
	t.Helper()
	name, gidIndex := e.name, e.gidIndex
	if err := verbs.QueryDevice(e.ctx, &e.dev); err != nil {
		t.Fatalf("ibv_query_device(%s): %v", name, err)
	}
	if err := verbs.QueryPort(e.ctx, vPort, &e.port); err != nil {
		t.Fatalf("ibv_query_port(%s, %d): %v", name, vPort, err)
	}
	if err := verbs.QueryGID(e.ctx, vPort, int32(gidIndex), &e.gid); err != nil {
		t.Fatalf("ibv_query_gid(%s, %d, %d): %v", name, vPort, gidIndex, err)
	}
	var err error
	e.pd, err = verbs.AllocPD(e.ctx)
	if e.pd == nil {
		t.Fatalf("ibv_alloc_pd(%s): %v", name, err)
	}
	t.Cleanup(func() {
		if err := verbs.DeallocPD(e.pd); err != nil {
			t.Errorf("ibv_dealloc_pd: %v", err)
		}
	})
}

// vMR is registered memory outside the Go heap (an anonymous mapping).
type vMR struct {
	buf []byte
	mr  *verbs.MR
}

// mmapBuf maps n bytes of anonymous memory, unmapped when the test ends
// (after everything registered later is released).
func mmapBuf(t testing.TB, n int) []byte {
	t.Helper()
	buf, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatalf("mmap(%d): %v", n, err)
	}
	t.Cleanup(func() {
		if err := syscall.Munmap(buf); err != nil {
			t.Errorf("munmap: %v", err)
		}
	})
	return buf
}

// regMR maps size bytes and registers them on pd with access.
func regMR(t testing.TB, pd *verbs.PD, size int, access verbs.AccessFlags) *vMR {
	t.Helper()
	m := &vMR{buf: mmapBuf(t, size)}
	var err error
	if m.mr, err = verbs.RegMR(pd, unsafe.Pointer(&m.buf[0]), uint64(size), access); err != nil {
		t.Fatalf("%d bytes, access %#x: %v", size, access, err)
	}
	t.Cleanup(func() {
		if err := verbs.DeregMR(m.mr); err != nil {
			t.Errorf("ibv_dereg_mr: %v", err)
		}
	})
	return m
}

// mr registers size bytes on the environment's PD with every access the
// tests need.
func (e *vEnv) mr(t testing.TB, size int) *vMR {
	t.Helper()
	return regMR(t, e.pd, size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
}

// addr is the address of byte off of the region.
func (m *vMR) addr(off int) uint64 { return uint64(uintptr(unsafe.Pointer(&m.buf[off]))) }

// sge is the scatter/gather entry for bytes [off, off+n) of the region.
func (m *vMR) sge(off, n int) verbs.SGE {
	return verbs.SGE{Addr: m.addr(off), Length: uint32(n), LKey: m.mr.LKey}
}

// vCQ is a CQ with its own completion channel, reaped with a hand.Poller.
type vCQ struct {
	cq     *verbs.CQ
	ch     *verbs.CompChannel
	poller *hand.Poller
}

// cq creates a CQ of at least entries entries on its own completion channel.
func (e *vEnv) cq(t testing.TB, entries int) *vCQ {
	t.Helper()
	c := &vCQ{}
	var err error
	c.ch, err = verbs.CreateCompChannel(e.ctx)
	if c.ch == nil {
		t.Fatalf("ibv_create_comp_channel: %v", err)
	}
	t.Cleanup(func() {
		if err := verbs.DestroyCompChannel(c.ch); err != nil {
			t.Errorf("ibv_destroy_comp_channel: %v", err)
		}
	})
	c.cq, err = verbs.CreateCQ(e.ctx, int32(entries), nil, c.ch, 0)
	if c.cq == nil {
		t.Fatalf("ibv_create_cq(%d): %v", entries, err)
	}
	t.Cleanup(func() {
		if err := verbs.DestroyCQ(c.cq); err != nil {
			t.Errorf("ibv_destroy_cq: %v", err)
		}
	})
	p, err := hand.NewPollerRaw(c.cq, 64)
	if err != nil {
		t.Fatalf("hand.NewPoller: %v", err)
	}
	c.poller = p
	t.Cleanup(func() { p.Close() })
	return c
}

// reap waits for exactly n completions and returns copies of them. It polls
// with PollSpin, spinning in C a little before it arms the CQ, so that every
// test that reaps polls the device through it. Between empty spins it arms
// the CQ and sleeps in poll(2) on the completion channel, so the wait costs
// little CPU and ends on an event, or fails the test at vTimeout.
// Completions beyond n that arrive with the last batch fail the test.
func (c *vCQ) reap(t testing.TB, n int) []hand.WC {
	t.Helper()
	deadline := time.Now().Add(vTimeout)
	out := make([]hand.WC, 0, n)
	armed := false
	for len(out) < n {
		wcs, err := c.poller.PollSpin(16)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		out = append(out, wcs...)
		if len(wcs) > 0 || len(out) >= n {
			continue
		}
		if !armed {
			// Arm, then poll again: a completion that arrived before
			// the arm raises no event.
			if err := verbs.ReqNotifyCQ(c.cq, 0); err != nil {
				t.Fatalf("ibv_req_notify_cq: %v", err)
			}
			armed = true
			continue
		}
		if err := waitReadable(c.ch.FD, deadline); err != nil {
			t.Fatalf("waiting for completion %d of %d: %v; got %s", len(out)+1, n, err, testkit.DescribeWCs(out))
		}
		var cq *verbs.CQ
		var ctx unsafe.Pointer
		if err := verbs.GetCQEvent(c.ch, &cq, &ctx); err != nil {
			t.Fatalf("ibv_get_cq_event: %v", err)
		}
		if cq != c.cq {
			t.Fatalf("ibv_get_cq_event returned CQ %p, want %p", cq, c.cq)
		}
		verbs.ACKCQEvents(cq, 1)
		armed = false
	}
	if len(out) > n {
		t.Fatalf("want %d completions, got %d: %s", n, len(out), testkit.DescribeWCs(out))
	}
	return out
}

// expectEmpty fails the test if the CQ holds a completion.
func (c *vCQ) expectEmpty(t testing.TB) {
	t.Helper()
	wcs, err := c.poller.Poll()
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	if len(wcs) != 0 {
		t.Fatalf("CQ should be empty, holds %s", testkit.DescribeWCs(wcs))
	}
}

// waitReadable sleeps in ppoll(2) until fd is readable or the deadline passes.
func waitReadable(fd int32, deadline time.Time) error {
	type pollFd struct {
		fd      int32
		events  int16
		revents int16
	}
	const pollIn = 0x1
	for {
		ms := time.Until(deadline).Milliseconds()
		if ms <= 0 {
			return fmt.Errorf("fd %d not readable after %v", fd, vTimeout)
		}
		p := pollFd{fd: fd, events: pollIn}
		// ppoll, not poll: arm64 has no poll system call.
		ts := syscall.NsecToTimespec(ms * int64(time.Millisecond))
		n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		switch {
		case e == syscall.EINTR:
		case e != 0:
			return fmt.Errorf("poll(fd %d): %w", fd, e)
		case n == 1 && p.revents&pollIn != 0:
			return nil
		case n == 1:
			return fmt.Errorf("poll(fd %d): revents %#x", fd, p.revents)
		}
	}
}

// vQPConfig says what qp makes.
type vQPConfig struct {
	typ        verbs.QPType
	send, recv *vCQ
	srq        *verbs.SRQ
	sendWR     int
	recvWR     int // ignored with an SRQ
	sge        int
}

// qp creates a QP (ibv_create_qp), destroyed when the test ends.
func (e *vEnv) qp(t testing.TB, cfg vQPConfig) *verbs.QP {
	t.Helper()
	attr := verbs.QPInitAttr{
		SendCQ: cfg.send.cq,
		RecvCQ: cfg.recv.cq,
		SRQ:    cfg.srq,
		QPType: cfg.typ,
		Cap: verbs.QPCap{
			MaxSendWR:  uint32(cfg.sendWR),
			MaxSendSGE: uint32(max(cfg.sge, 1)),
		},
	}
	if cfg.srq == nil {
		attr.Cap.MaxRecvWR = uint32(cfg.recvWR)
		attr.Cap.MaxRecvSGE = uint32(max(cfg.sge, 1))
	}
	var qp *verbs.QP
	var err error
	qp, err = verbs.CreateQP(e.pd, &attr)
	if qp == nil {
		t.Fatalf("ibv_create_qp(type %d, caps %+v): %v", cfg.typ, attr.Cap, err)
	}
	t.Cleanup(func() {
		if err := verbs.DestroyQP(qp); err != nil {
			t.Errorf("ibv_destroy_qp(%d): %v", qp.QPNum, err)
		}
	})
	return qp
}

// modify is ibv_modify_qp, failing the test with the step's name.
func modify(t testing.TB, qp *verbs.QP, attr *verbs.QPAttr, mask verbs.QPAttrMask, step string) {
	t.Helper()
	if err := verbs.ModifyQP(qp, attr, mask); err != nil {
		t.Fatalf("ibv_modify_qp(QP %d, %s, mask %#x): %v", qp.QPNum, step, mask, err)
	}
	if qp.State != attr.QPState {
		t.Fatalf("QP %d after ibv_modify_qp(%s): state %d, want %d", qp.QPNum, step, qp.State, attr.QPState)
	}
}

// route is the address vector to this device's own RoCE v2 GID: every QP
// in these tests talks to a QP on the same device, through rxe's loopback.
func (e *vEnv) route() verbs.AHAttr {
	return verbs.AHAttr{
		IsGlobal: 1,
		PortNum:  vPort,
		GRH: verbs.GlobalRoute{
			DGID:      e.gid,
			SGIDIndex: uint8(e.gidIndex),
			HopLimit:  64,
		},
	}
}

// vRCAccess is the remote access RC QPs grant their peer.
const vRCAccess = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead

// connectRC moves two fresh RC QPs on the device through INIT, RTR (with
// the RoCE GRH) and RTS, each aimed at the other.
func (e *vEnv) connectRC(t testing.TB, a, b *verbs.QP) {
	t.Helper()
	rd := uint8(min(16, e.dev.MaxQPRDAtom))
	initRD := uint8(min(16, e.dev.MaxQPInitRDAtom))
	psn := map[*verbs.QP]uint32{a: 0x00a000 + a.QPNum&0xfff, b: 0x0b0000 + b.QPNum&0xfff}
	for _, q := range []*verbs.QP{a, b} {
		modify(t, q, &verbs.QPAttr{QPState: verbs.QPSInit, PortNum: vPort, QPAccessFlags: vRCAccess},
			verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags, "INIT")
	}
	for _, pair := range [][2]*verbs.QP{{a, b}, {b, a}} {
		q, peer := pair[0], pair[1]
		modify(t, q, &verbs.QPAttr{
			QPState:         verbs.QPSRtr,
			PathMTU:         e.port.ActiveMTU,
			DestQPNum:       peer.QPNum,
			RQPSN:           psn[peer],
			MaxDestRDAtomic: rd,
			MinRNRTimer:     1,
			AHAttr:          e.route(),
		}, verbs.QPAttrState|verbs.QPAttrAv|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN|
			verbs.QPAttrMaxDestRDAtomic|verbs.QPAttrMinRNRTimer, "RTR")
		modify(t, q, &verbs.QPAttr{
			QPState:     verbs.QPSRts,
			SQPSN:       psn[q],
			Timeout:     14,
			RetryCnt:    7,
			RNRRetry:    7,
			MaxRDAtomic: initRD,
		}, verbs.QPAttrState|verbs.QPAttrSQPSN|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|verbs.QPAttrRNRRetry|
			verbs.QPAttrMaxQPRDAtomic, "RTS")
	}
}

// readyUD moves a fresh UD QP through INIT (with qkey), RTR and RTS.
func readyUD(t testing.TB, qp *verbs.QP, qkey uint32) {
	t.Helper()
	modify(t, qp, &verbs.QPAttr{QPState: verbs.QPSInit, PortNum: vPort, QKey: qkey},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey, "INIT")
	modify(t, qp, &verbs.QPAttr{QPState: verbs.QPSRtr}, verbs.QPAttrState, "RTR")
	modify(t, qp, &verbs.QPAttr{QPState: verbs.QPSRts, SQPSN: 0x1234}, verbs.QPAttrState|verbs.QPAttrSQPSN, "RTS")
}

// vPair is two connected RC QPs, each with its own CQ for sends and receives.
type vPair struct {
	a, b     *verbs.QP
	acq, bcq *vCQ
}

// rcPair makes and connects an RC pair with room for wr outstanding WRs
// each way and sge scatter entries per WR. Nothing is signalled unless the
// WR asks.
func (e *vEnv) rcPair(t testing.TB, wr, sge int) *vPair {
	t.Helper()
	p := &vPair{acq: e.cq(t, 2*wr), bcq: e.cq(t, 2*wr)}
	p.a = e.qp(t, vQPConfig{typ: verbs.QPTRC, send: p.acq, recv: p.acq, sendWR: wr, recvWR: wr, sge: sge})
	p.b = e.qp(t, vQPConfig{typ: verbs.QPTRC, send: p.bcq, recv: p.bcq, sendWR: wr, recvWR: wr, sge: sge})
	e.connectRC(t, p.a, p.b)
	return p
}

// fill writes a pattern that differs per seed and per offset.
func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*131 + i*7 + i>>8)
	}
}

// wcByID indexes completions by wr_id, failing on a duplicate.
func wcByID(t testing.TB, wcs []hand.WC) map[uint64]hand.WC {
	t.Helper()
	m := make(map[uint64]hand.WC, len(wcs))
	for _, w := range wcs {
		if _, dup := m[w.WRID()]; dup {
			t.Fatalf("wr_id %d completed twice: %s", w.WRID(), testkit.DescribeWCs(wcs))
		}
		m[w.WRID()] = w
	}
	return m
}

// mustOK fails the test on a failed completion.
func mustOK(t testing.TB, wcs []hand.WC) {
	t.Helper()
	for i := range wcs {
		if !wcs[i].OK() {
			t.Fatalf("completion of wr_id %d: %s (vendor_err %#x); all: %s",
				wcs[i].WRID(), wcs[i].StatusString(), wcs[i].VendorErr(), testkit.DescribeWCs(wcs))
		}
	}
}
