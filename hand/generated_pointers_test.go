package hand_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// The pointer rules of the generated packages' doc comment, case by case:
// what cgo's check still catches in a control-path stub, and what the
// data-path stubs and handle slots leave unchecked.

// cgoCheckMessage is what cgo's pointer check panics with.
const cgoCheckMessage = "argument of cgo function has Go pointer to unpinned Go pointer"

// cMemory returns n zeroed values of T outside the Go heap (an anonymous
// mapping, unmapped when the test ends): memory that cgo's rules let C
// keep pointers to, which the data-path stubs expect their records in.
func cMemory[T any](t testing.TB, n int) []T {
	t.Helper()
	var zero T
	mem, err := syscall.Mmap(-1, 0, int(unsafe.Sizeof(zero))*n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Munmap(mem) })
	return unsafe.Slice((*T)(unsafe.Pointer(&mem[0])), n)
}

// panicMessage calls f and returns what it panicked with, "" if nothing.
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// pkgCQ is a package-level variable of a struct type with pointer fields
// (Context, Channel, CQContext), which stay nil.
var pkgCQ verbs.CQ

// A control-path stub still checks its record arguments: a pointer to a
// package-level variable of a struct type with pointer fields panics with
// cgo's message even though every pointer field is nil (cgo cannot tell
// where an object in the data or bss section ends), before C is called.
// The same contents in a local copy, or in C memory, pass.
// ibv_ack_cq_events (a libibverbs extern) only counts under the CQ's
// mutex, which zeroed memory initializes.
func TestGeneratedCheckedStubPanicsOnPackageVarNotOnLocalOrCMemory(t *testing.T) {
	require.NoError(t, verbs.Available("ibv_ack_cq_events"))
	require.Nil(t, pkgCQ.Context)
	require.Contains(t, panicMessage(func() { verbs.ACKCQEvents(&pkgCQ, 1) }), cgoCheckMessage)
	require.Zero(t, pkgCQ.CompEventsCompleted, "the check panics before C is called")

	local := pkgCQ
	verbs.ACKCQEvents(&local, 2)
	require.Equal(t, uint32(2), local.CompEventsCompleted, "a local copy")

	inC := &cMemory[verbs.CQ](t, 1)[0]
	*inC = pkgCQ
	verbs.ACKCQEvents(inC, 3)
	require.Equal(t, uint32(3), inC.CompEventsCompleted, "in C memory")
}

// pkgSendWR and pkgRecvWR are package-level work requests: a checked stub
// would panic on them (see above); their pointers point into C memory, as
// cgo's rules allow.
var (
	pkgSendWR verbs.SendWR
	pkgRecvWR verbs.RecvWR
)

// The data-path stubs check none of their pointers: the package-level work
// requests that a checked stub panics on post.
func TestGeneratedDataPathLeavesPackageVarsUnchecked(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	sg := &cMemory[verbs.SGE](t, 1)[0]
	*sg = sge(0)
	pkgRecvWR = verbs.RecvWR{WRID: 1, SGList: sg, NumSGE: 1}
	pkgSendWR = verbs.SendWR{WRID: 2, SGList: sg, NumSGE: 1, Opcode: verbs.WROpSend}
	var rbad *verbs.RecvWR
	var sbad *verbs.SendWR
	require.NoError(t, verbs.PostRecv(r.qp, &pkgRecvWR, &rbad))
	require.NoError(t, verbs.PostSRQRecv(r.srq, &pkgRecvWR, &rbad))
	require.NoError(t, verbs.PostSend(r.qp, &pkgSendWR, &sbad))
	require.Equal(t, uint64(1), r.fqp.RecvStats().Posted)
	require.Equal(t, uint64(1), r.fsrq.Stats().Posted)
	require.Equal(t, uint64(1), r.fqp.SendStats().Posted)
}

// Chains in C memory: 16 receive WRs and 16 send WRs linked through next,
// each with its SGE, and a WC array, posted and reaped through the
// data-path stubs with a local bad_wr slot, with no allocation.
func TestGeneratedDataPathPostsCMemoryChainsWithoutAllocating(t *testing.T) {
	const n = 16
	r := newRig(t, rigOpts{})
	r.fqp.SetSendMode(fakeprov.Sink) // unsignaled sends: no CQE
	sges := cMemory[verbs.SGE](t, 2*n)
	rwrs := cMemory[verbs.RecvWR](t, n)
	swrs := cMemory[verbs.SendWR](t, n)
	wcs := cMemory[verbs.WC](t, n)
	for i := range n {
		sges[i], sges[n+i] = sge(i), sge(n+i)
		rwrs[i] = verbs.RecvWR{WRID: uint64(i), SGList: &sges[i], NumSGE: 1}
		swrs[i] = verbs.SendWR{WRID: uint64(n + i), SGList: &sges[n+i], NumSGE: 1, Opcode: verbs.WROpSend}
		if i > 0 {
			rwrs[i-1].Next, swrs[i-1].Next = &rwrs[i], &swrs[i]
		}
	}

	rounds := 0
	round := func() {
		var rbad *verbs.RecvWR
		must(t, verbs.PostRecv(r.qp, &rwrs[0], &rbad))
		got, err := verbs.PollCQ(r.vcq, n, &wcs[0])
		must(t, err)
		if got != n || wcs[0].WRID != 0 || wcs[n-1].WRID != n-1 {
			t.Fatalf("PollCQ reaped %d, WR IDs %d..%d; want %d, 0..%d", got, wcs[0].WRID, wcs[n-1].WRID, n, n-1)
		}
		var sbad *verbs.SendWR
		must(t, verbs.PostSend(r.qp, &swrs[0], &sbad))
		rounds++
	}
	requireNoAllocs(t, "posting and reaping C-memory chains", round)
	require.Equal(t, uint64(n*rounds), r.fqp.RecvStats().Posted)
	require.Equal(t, uint64(n*rounds), r.fqp.SendStats().Posted)
	require.Equal(t, uint64(n*rounds), r.cq.Stats().Polled)
}

// node is an element of a large Go object: a slice of them is one heap
// allocation, every element of which holds a Go pointer (name's bytes).
type node struct {
	name  string
	cq    verbs.CQ
	rbad  *verbs.RecvWR
	sbad  *verbs.SendWR
	srbad *verbs.RecvWR
}

// A handle slot inside a large heap object that holds Go pointers: cgo's
// check of a pointer into the object scans all of it, finds the Go
// pointers and panics (a checked record argument into the same object
// shows it), so a checked bad_wr slot there used to panic as well. Handle
// slots are passed unchecked: PostRecv, PostSend and PostSRQRecv write the
// failing WR into &nodes[i].*bad without a panic or a scan, and without
// allocating. (gen's golden stub test shows the same for a control-path
// extern.)
func TestGeneratedHandleSlotInLargeObjectIsNotScanned(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	nodes := make([]node, 100)
	for i := range nodes {
		nodes[i].name = fmt.Sprintf("node %d", i)
	}
	require.NoError(t, verbs.Available("ibv_ack_cq_events"))
	require.Contains(t, panicMessage(func() { verbs.ACKCQEvents(&nodes[1].cq, 1) }), cgoCheckMessage,
		"a checked pointer into nodes: cgo scans all of nodes")

	sg := &cMemory[verbs.SGE](t, 1)[0]
	*sg = sge(0)
	rwr := &cMemory[verbs.RecvWR](t, 1)[0]
	*rwr = verbs.RecvWR{WRID: 1, SGList: sg, NumSGE: 1}
	swr := &cMemory[verbs.SendWR](t, 1)[0]
	*swr = verbs.SendWR{WRID: 2, SGList: sg, NumSGE: 1, Opcode: verbs.WROpSend}
	n := &nodes[7]
	fail := func() {
		n.rbad, n.sbad, n.srbad = nil, nil, nil
		r.fqp.FailRecv(0, syscall.EINVAL)
		if err := verbs.PostRecv(r.qp, rwr, &n.rbad); !errors.Is(err, syscall.EINVAL) || n.rbad != rwr {
			t.Fatalf("PostRecv = %v, bad_wr %p; want EINVAL, %p", err, n.rbad, rwr)
		}
		r.fqp.FailSend(0, syscall.EINVAL)
		if err := verbs.PostSend(r.qp, swr, &n.sbad); !errors.Is(err, syscall.EINVAL) || n.sbad != swr {
			t.Fatalf("PostSend = %v, bad_wr %p; want EINVAL, %p", err, n.sbad, swr)
		}
		r.fsrq.FailRecv(0, syscall.EINVAL)
		if err := verbs.PostSRQRecv(r.srq, rwr, &n.srbad); !errors.Is(err, syscall.EINVAL) || n.srbad != rwr {
			t.Fatalf("PostSRQRecv = %v, bad_wr %p; want EINVAL, %p", err, n.srbad, rwr)
		}
	}
	fail()
	requireNoAllocs(t, "failing posts into slots of nodes", fail)
}

// Why the unchecked pointers stay pointers (not uintptr_t): a goroutine's
// stack can grow, and move, between the stub and C (the cgo wrapper's own
// prologue grows it), which adjusts a pointer to a local but not an
// address passed as an integer, so C would write a local bad_wr slot into
// the old stack. Each call below starts at another stack depth in a fresh
// goroutine, so that some call's stack grows right there; the failing WR
// must arrive in the local slot every time.
func TestGeneratedLocalSlotArrivesWhenTheStackMoves(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	sg := &cMemory[verbs.SGE](t, 1)[0]
	*sg = sge(0)
	wr := &cMemory[verbs.RecvWR](t, 1)[0]
	*wr = verbs.RecvWR{WRID: 1, SGList: sg, NumSGE: 1}
	post := func() bool {
		var bad *verbs.RecvWR
		r.fqp.FailRecv(0, syscall.EINVAL)
		err := verbs.PostRecv(r.qp, wr, &bad)
		return errors.Is(err, syscall.EINVAL) && bad == wr
	}
	lost := 0
	for depth := range 600 {
		for pad := range 8 {
			done := make(chan bool)
			go func() { done <- atDepth(depth, pad, post) }()
			if !<-done {
				lost++
			}
		}
	}
	require.Zero(t, lost, "calls whose bad_wr did not arrive in the local slot")
}

// atDepth calls f below depth frames of its own and one of 8 frame sizes.
//
//go:noinline
func atDepth(depth, pad int, f func() bool) bool {
	var b [2]uintptr
	b[depth&1] = uintptr(depth)
	if depth > 0 {
		return atDepth(depth-1, pad, f) && b[depth&1] == uintptr(depth)
	}
	switch pad {
	case 0:
		return f()
	case 1:
		return padded[[1]uintptr](f)
	case 2:
		return padded[[2]uintptr](f)
	case 3:
		return padded[[3]uintptr](f)
	case 4:
		return padded[[4]uintptr](f)
	case 5:
		return padded[[5]uintptr](f)
	case 6:
		return padded[[6]uintptr](f)
	default:
		return padded[[7]uintptr](f)
	}
}

// padded calls f from a frame that holds a P.
//
//go:noinline
func padded[P any](f func() bool) bool {
	var p P
	ok := f()
	keep(unsafe.Pointer(&p))
	return ok
}

// keep makes its caller keep what p points to in its frame.
//
//go:noinline
func keep(p unsafe.Pointer) {}
