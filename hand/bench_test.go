package hand_test

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/hand/internal/cbench"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// BenchmarkFast/<case>/<n> measures a Go fast path and a C loop doing the
// same work (hand/internal/cbench) over the same fake provider, alternating
// between them in slices of about 0.2 ms so that whatever slows the machine
// down slows both alike; it reports go-ns/op and c-ns/op, and `make bench`
// turns them into ratio lines. Posts go to queues in Sink mode (WQEs written,
// doorbell rung, no completion), polls to a CQ that cycles through 64
// completions without running dry.
//
// Times are CPU time, not wall time: on a machine shared with other work,
// time the scheduler hands to other processes inflates wall time (ns/op) but
// not CPU time. BenchmarkFast counts its own thread's (threadClock), the
// other benchmarks the process's (cpu-ns/op).

// cpuClock is the CPU time the process has used (CLOCK_PROCESS_CPUTIME_ID).
func cpuClock() time.Duration {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 2 /* CLOCK_PROCESS_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// threadClock is the calling thread's CPU time: pair locks its goroutine to
// one thread and charges each side only that thread's time, not the runtime's
// other threads (GC workers, sysmon, an M spinning for work), which process
// CPU time would charge to whichever side happened to be running.
func threadClock() time.Duration {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3 /* CLOCK_THREAD_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// reportCPU reports the CPU time per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuClock()-start)/float64(b.N), "cpu-ns/op")
}

var (
	postSizes = []int{1, 8, 32, 64}
	pollSizes = []int{1, 16, 64}
	// emptySpins is poll_cq_spin's polls per iteration.
	emptySpins = 64
)

// benchSGE is the scatter entry of WR i, as cbench's C loops fill it.
func benchSGE(i int) verbs.SGE {
	return verbs.SGE{Addr: cbench.Addr + uint64(i)*cbench.Len, Length: cbench.Len, LKey: cbench.LKey}
}

func BenchmarkCgoEmpty(b *testing.B) {
	t0 := cpuClock()
	for range b.N {
		cbench.Empty()
	}
	reportCPU(b, t0)
}

// BenchmarkCgoEmptyPtr3 is an empty crossing with three pointer arguments
// (to C memory) of types cgo checks, as a stub with three record arguments
// makes one: cgo checks each for Go pointers.
func BenchmarkCgoEmptyPtr3(b *testing.B) {
	p := newRig(b, rigOpts{}).fqp.Ptr()
	t0 := cpuClock()
	for range b.N {
		cbench.EmptyPtr3(p, p, p)
	}
	reportCPU(b, t0)
}

// side runs iters iterations of one side of a case.
type side func(iters int) error

// pair measures one case: the Go side (made by mkGo, which returns it and
// its cleanup), the C side and as many empty cgo calls alternate, each slice
// growing until the three take about 0.4 ms of CPU. The empty calls give the
// case its own cgo-ns/op, taken under the same conditions as the two sides.
func pair(b *testing.B, name string, n int, mkGo func(b *testing.B) (side, func()), cSide side) {
	pairWith(b, name, n, mkGo, cSide, func(iters int) {
		for range iters {
			cbench.Empty()
		}
	})
}

// pairWith is pair with empty as the case's empty cgo calls: iters
// crossings that do nothing in C.
func pairWith(b *testing.B, name string, n int, mkGo func(b *testing.B) (side, func()), cSide side, empty func(iters int)) {
	b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
		runtime.LockOSThread() // for threadClock
		defer runtime.UnlockOSThread()
		goSide, done := mkGo(b)
		defer done()
		goSide = inject(b, goSide)
		var goT, cT, cgoT time.Duration
		chunk := 16
		b.ResetTimer()
		for left := b.N; left > 0; {
			k := min(chunk, left)
			t0 := threadClock()
			if err := goSide(k); err != nil {
				b.Fatal(err)
			}
			t1 := threadClock()
			if err := cSide(k); err != nil {
				b.Fatal(err)
			}
			t2 := threadClock()
			empty(k)
			t3 := threadClock()
			goT += t1 - t0
			cT += t2 - t1
			cgoT += t3 - t2
			left -= k
			if t3-t0 < 400*time.Microsecond {
				chunk *= 2
			}
		}
		b.ReportMetric(float64(goT)/float64(b.N), "go-ns/op")
		b.ReportMetric(float64(cT)/float64(b.N), "c-ns/op")
		b.ReportMetric(float64(cgoT)/float64(b.N), "cgo-ns/op")
	})
}

// benchInject is GOVERBS_BENCH_INJECT, a fault to inject into every Go side
// so as to show that make bench-gate catches it (hand/internal/benchratio's
// tests): "alloc" adds one heap allocation per op, "crossing" one more empty
// cgo call per op. Unset, inject hands the Go side back as it is: the knob
// costs the measured loops nothing.
var benchInject = os.Getenv("GOVERBS_BENCH_INJECT")

// injected keeps the injected allocations on the heap.
var injected []byte

func inject(b *testing.B, s side) side {
	switch benchInject {
	case "":
		return s
	case "alloc":
		return func(iters int) error {
			for range iters {
				injected = make([]byte, 8)
			}
			return s(iters)
		}
	case "crossing":
		return func(iters int) error {
			for range iters {
				cbench.Empty()
			}
			return s(iters)
		}
	}
	b.Fatalf("GOVERBS_BENCH_INJECT=%q: want alloc, crossing or nothing", benchInject)
	return nil
}

func BenchmarkFast(b *testing.B) {
	r := sinkRig(b, fakeprov.RC)
	ud := sinkRig(b, fakeprov.UD)
	id := r.cmID(b, false)

	for _, n := range postSizes {
		pair(b, "post_recv", n, benchRecv(n, func(c *hand.RecvChain) error { return c.PostRecvRaw(r.qp) }),
			func(iters int) error { return cbench.PostRecv(r.fqp.Ptr(), n, iters) })
	}
	for _, n := range postSizes {
		pair(b, "post_srq_recv", n, benchRecv(n, func(c *hand.RecvChain) error { return c.PostSRQRecvRaw(r.srq) }),
			func(iters int) error { return cbench.PostSRQRecv(r.fsrq.Ptr(), n, iters) })
	}
	for _, k := range sendKinds {
		rr := r
		if k.kind == cbench.UD {
			rr = ud
		}
		for _, n := range postSizes {
			pair(b, "post_send_"+k.name, n, benchSend(n, rr, k.kind, func(c *hand.SendChain) error { return c.PostSendRaw(rr.qp) }),
				func(iters int) error { return cbench.PostSend(rr.fqp.Ptr(), k.kind, unsafe.Pointer(rr.ah), n, iters) })
		}
	}
	for _, n := range postSizes {
		pair(b, "rdma_post_recvv", n, benchRecv(n, func(c *hand.RecvChain) error { return c.PostRecvvRaw(id) }),
			func(iters int) error { return cbench.RDMAPost(unsafe.Pointer(id), cbench.Recvv, n, iters) })
	}
	for _, v := range []struct {
		name string
		kind cbench.RDMAKind
		fill cbench.SendKind
		post func(c *hand.SendChain) error
	}{
		{"rdma_post_sendv", cbench.Sendv, cbench.Send, func(c *hand.SendChain) error { return c.PostSendvRaw(id) }},
		{"rdma_post_readv", cbench.Readv, cbench.Read, func(c *hand.SendChain) error { return c.PostReadvRaw(id) }},
		{"rdma_post_writev", cbench.Writev, cbench.Write, func(c *hand.SendChain) error { return c.PostWritevRaw(id) }},
	} {
		for _, n := range postSizes {
			pair(b, v.name, n, benchSend(n, r, v.fill, v.post),
				func(iters int) error { return cbench.RDMAPost(unsafe.Pointer(id), v.kind, n, iters) })
		}
	}

	pr := pollRig(b)
	for _, n := range pollSizes {
		pair(b, "poll_cq", n, benchPoll(n, func() (func() ([]hand.WC, error), func()) {
			p, err := hand.NewPollerRaw(pr.vcq, n)
			require.NoError(b, err)
			return p.Poll, func() { p.Close() }
		}), func(iters int) error { return cbench.Poll(pr.cq.Ptr(), n, iters) })
	}
	// A busy-poll's empty spins: 64 polls of an empty CQ per iteration, in
	// one crossing (PollSpin) against C's loop of 64 ibv_poll_cq calls.
	empty := newRig(b, rigOpts{})
	pair(b, "poll_cq_spin", emptySpins, func(b *testing.B) (side, func()) {
		p, err := hand.NewPollerRaw(empty.vcq, 16)
		require.NoError(b, err)
		return func(iters int) error {
			for range iters {
				wcs, err := p.PollSpin(emptySpins)
				if err != nil {
					return err
				}
				if len(wcs) != 0 {
					return syscall.EAGAIN
				}
			}
			return nil
		}, func() { p.Close() }
	}, func(iters int) error { return cbench.PollEmpty(empty.cq.Ptr(), 16, emptySpins, iters) })
	for _, n := range pollSizes {
		// The C side runs hand.c's own reader loop over the Go side's
		// buffers (cbench.PollEx says why): what differs is Go's.
		p, err := hand.NewExPollerRaw(pr.vcqEx, n, benchExFlags)
		require.NoError(b, err)
		wc, ts, fail := p.Buffers()
		pair(b, "poll_cq_ex", n, benchPoll(n, func() (func() ([]hand.WC, error), func()) {
			return p.Poll, func() {}
		}), func(iters int) error {
			return cbench.PollEx(hand.PollExReader(), pr.cq.ExPtr(), wc, ts, fail, n, iters, uint64(benchExFlags))
		})
		p.Close()
	}
}

// benchExFlags are the fields the extended poll benchmarks read: the
// standard set of ibv_poll_cq.
const benchExFlags = verbs.CreateCQWCFlags(verbs.WCStandardFlags)

// Not inlined: the closure of an inlined copy loses the inlining of its callees.
//
//go:noinline
func benchRecv(n int, post func(c *hand.RecvChain) error) func(b *testing.B) (side, func()) {
	return func(b *testing.B) (side, func()) {
		c, err := hand.NewRecvChain(n, 1)
		require.NoError(b, err)
		var id uint64
		return func(iters int) error {
			for range iters {
				v := c.Reserve(n)
				for i := 0; i < n; i++ {
					v.Set(i, id, benchSGE(i))
					id++
				}
				if err := post(c); err != nil {
					return err
				}
			}
			return nil
		}, func() { c.Close() }
	}
}

// sendKinds are the send benchmarks: cbench's kinds and their names.
var sendKinds = []struct {
	name string
	kind cbench.SendKind
}{
	{"send", cbench.Send}, {"send_imm", cbench.SendImm}, {"write", cbench.Write},
	{"write_imm", cbench.WriteImm}, {"read", cbench.Read}, {"cas", cbench.CAS},
	{"faa", cbench.FAA}, {"inline", cbench.Inline}, {"ud", cbench.UD},
}

var inlineData = []byte(cbench.InlineData)

// benchSend fills n WRs of one kind per iteration, as cbench's send_fill
// does, and posts them. Each kind has a loop of its own, as an application's
// code has (gcc unswitches send_fill's switch out of the C loop likewise).
//
//go:noinline
func benchSend(n int, r *rig, kind cbench.SendKind, post func(c *hand.SendChain) error) func(b *testing.B) (side, func()) {
	return func(b *testing.B) (side, func()) {
		c, err := hand.NewSendChain(n, 1, cbench.InlineLen)
		require.NoError(b, err)
		fill := sendFill(kind, r.hah)
		var id uint64
		return func(iters int) error {
			for range iters {
				id = fill(c.Reserve(n), id)
				if err := post(c); err != nil {
					return err
				}
			}
			return nil
		}, func() { c.Close() }
	}
}

const sig = hand.Signaled

// raddr is the remote address of WR i, as cbench's send_fill sets it.
func raddr(i int) uint64 { return cbench.RAddr + uint64(i)*cbench.Len }

// atomicSGE is benchSGE(i) for an 8-byte atomic.
func atomicSGE(i int) verbs.SGE {
	s := benchSGE(i)
	s.Length = 8
	return s
}

// sendFill returns the loop filling every WR of v with one kind, wr_ids from id on.
func sendFill(kind cbench.SendKind, ah *hand.AH) func(v hand.SendWRs, id uint64) uint64 {
	switch kind {
	case cbench.Send:
		return func(v hand.SendWRs, id uint64) uint64 {
			for i := range v.Len() {
				v.SetSend(i, id+uint64(i), sig, benchSGE(i))
			}
			return id + uint64(v.Len())
		}
	case cbench.SendImm:
		return func(v hand.SendWRs, id uint64) uint64 {
			for i := range v.Len() {
				v.SetSendImm(i, id+uint64(i), sig, uint32(i), benchSGE(i))
			}
			return id + uint64(v.Len())
		}
	case cbench.Write:
		return func(v hand.SendWRs, id uint64) uint64 {
			for i := range v.Len() {
				v.SetWrite(i, id+uint64(i), sig, benchSGE(i), raddr(i), cbench.RKey)
			}
			return id + uint64(v.Len())
		}
	case cbench.WriteImm:
		return func(v hand.SendWRs, id uint64) uint64 {
			for i := range v.Len() {
				v.SetWriteImm(i, id+uint64(i), sig, uint32(i), benchSGE(i), raddr(i), cbench.RKey)
			}
			return id + uint64(v.Len())
		}
	case cbench.Read:
		return func(v hand.SendWRs, id uint64) uint64 {
			for i := range v.Len() {
				v.SetRead(i, id+uint64(i), sig, benchSGE(i), raddr(i), cbench.RKey)
			}
			return id + uint64(v.Len())
		}
	case cbench.CAS:
		return func(v hand.SendWRs, id uint64) uint64 {
			for i := range v.Len() {
				v.SetCompareSwap(i, id+uint64(i), sig, atomicSGE(i), raddr(i), cbench.RKey, uint64(i), uint64(i)+1)
			}
			return id + uint64(v.Len())
		}
	case cbench.FAA:
		return func(v hand.SendWRs, id uint64) uint64 {
			for i := range v.Len() {
				v.SetFetchAdd(i, id+uint64(i), sig, atomicSGE(i), raddr(i), cbench.RKey, 1)
			}
			return id + uint64(v.Len())
		}
	case cbench.Inline:
		return func(v hand.SendWRs, id uint64) uint64 {
			for i := range v.Len() {
				v.SetInline(i, id+uint64(i), sig, inlineData)
			}
			return id + uint64(v.Len())
		}
	case cbench.UD:
		return func(v hand.SendWRs, id uint64) uint64 {
			for i := range v.Len() {
				v.SetUD(i, id+uint64(i), sig, benchSGE(i), ah, cbench.RemoteQPN, cbench.QKey)
			}
			return id + uint64(v.Len())
		}
	}
	panic("unknown send kind")
}

// pollRig has 64 completions on its CQ that polling cycles through forever.
func pollRig(b testing.TB) *rig {
	r := newRig(b, rigOpts{})
	c, err := hand.NewRecvChain(64, 1)
	require.NoError(b, err)
	defer c.Close()
	v := c.Reserve(64)
	for i := 0; i < 64; i++ {
		v.Set(i, uint64(i), benchSGE(i))
	}
	require.NoError(b, c.PostRecvRaw(r.qp))
	require.NoError(b, r.cq.SetEndless(true))
	return r
}

// Not inlined: the closure of an inlined copy loses the inlining of its callees.
//
//go:noinline
func benchPoll(n int, mk func() (func() ([]hand.WC, error), func())) func(b *testing.B) (side, func()) {
	return func(b *testing.B) (side, func()) {
		poll, free := mk()
		return func(iters int) error {
			var sum uint64
			for range iters {
				wcs, err := poll()
				if err != nil {
					return err
				}
				if len(wcs) != n {
					return fmt.Errorf("poll: %d completions, want %d", len(wcs), n)
				}
				for i := range wcs {
					sum += wcs[i].WRID() + uint64(wcs[i].Status())
				}
			}
			sink = sum
			return nil
		}, free
	}
}

var sink uint64

// BenchmarkNaive is what the fast path saves: the generated stubs fed from
// Go memory allocated per call, the chain pinned so that cgo accepts its
// pointers.
func BenchmarkNaive(b *testing.B) {
	r := sinkRig(b, fakeprov.RC)
	for _, n := range postSizes {
		b.Run(fmt.Sprintf("post_recv/%d", n), func(b *testing.B) {
			var id uint64
			t0 := cpuClock()
			for range b.N {
				wrs := make([]verbs.RecvWR, n)
				sges := make([]verbs.SGE, n)
				var pin runtime.Pinner
				pin.Pin(&wrs[0])
				pin.Pin(&sges[0])
				for i := range wrs {
					wrs[i].WRID = id
					id++
					wrs[i].SGList = &sges[i]
					wrs[i].NumSGE = 1
					sges[i] = benchSGE(i)
					if i+1 < n {
						wrs[i].Next = &wrs[i+1]
					}
				}
				var bad *verbs.RecvWR
				err := verbs.PostRecv(r.qp, &wrs[0], &bad)
				pin.Unpin()
				if err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, t0)
		})
	}
	pr := pollRig(b)
	for _, n := range pollSizes {
		b.Run(fmt.Sprintf("poll_cq/%d", n), func(b *testing.B) {
			var sum uint64
			t0 := cpuClock()
			for range b.N {
				wc := make([]verbs.WC, n)
				got, err := verbs.PollCQ(pr.vcq, int32(n), &wc[0])
				if err != nil {
					b.Fatal(err)
				}
				for i := range got {
					sum += wc[i].WRID
				}
			}
			reportCPU(b, t0)
			sink = sum
		})
	}
}

// BenchmarkGenerated/<case>/<n> measures the generated data-path stubs of
// packages verbs and rdmacm called as a user of the generated layer calls
// them, against the C loops of BenchmarkFast's cases of one WR (cbench),
// which call the same static inlines: one WR filled in place in C memory
// (an anonymous mapping), a local bad_wr; the rdma_post_*v stubs on an
// rdma_cm_id in C memory (the fake provider's) whose qp is the rig's. Each
// stub is one crossing around the C function it calls, so make bench-gate
// holds every case to C plus one empty cgo call plus 1 ns per WR or
// completion, and no allocation (hand/internal/benchratio). It is also the
// A/B bench of the stubs' #cgo directives (BENCHMARKS.md, "The generated
// stubs against their bound").
func BenchmarkGenerated(b *testing.B) {
	for _, c := range generatedCases(b) {
		pairWith(b, c.name, c.n, func(*testing.B) (side, func()) { return c.goSide, func() {} }, c.cSide, c.empty)
	}
}

// genCase is a case of BenchmarkGenerated: a Go side calling a generated
// stub, and the C loop doing the same work.
type genCase struct {
	name          string
	n             int // WRs posted or completions reaped per iteration
	goSide, cSide side
	// empty makes iters empty cgo calls of the stub's own shape (its
	// arguments, its result, errno where it reads it): the one crossing
	// the case's bound allows.
	empty func(iters int)
	q     *wqView // the queue a post writes to; nil for a poll
}

// wqView reads a fake work queue: its producer counter, and the first
// basic block of the WQE at counter value i, with the WQE counter a send
// WQE carries zeroed (the two sides' counters differ).
type wqView struct {
	head func() uint32
	wqe  func(i uint32) [fakeprov.WQEBytes]byte
}

// generatedCases makes BenchmarkGenerated's cases on rigs of their own:
// posts to queues in Sink mode, polls of a CQ cycling through 64
// completions.
func generatedCases(tb testing.TB) []genCase {
	r := sinkRig(tb, fakeprov.RC)
	cm := r.cmID(tb, false) // no SRQ: rdma_post_recvv posts to the QP
	pr := pollRig(tb)
	mem, err := syscall.Mmap(-1, 0, 1<<16, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(tb, err)
	tb.Cleanup(func() { syscall.Munmap(mem) })
	base := unsafe.Pointer(&mem[0])
	sg := (*verbs.SGE)(base)
	rwr := (*verbs.RecvWR)(unsafe.Add(base, 64))
	swr := (*verbs.SendWR)(unsafe.Add(base, 256))
	// The rdma_post_*v contexts: WR i's is record i%64 of these, as an
	// application's points at its own record of the request.
	ctxs := unsafe.Add(base, 2048)
	ctx := func(id uint64) unsafe.Pointer { return unsafe.Add(ctxs, (id%64)*8) }
	wcs := (*verbs.WC)(unsafe.Add(base, 4096))
	// As the C loops do, the chain's links are set once and each post
	// writes only the fields that change, not the whole record.
	rwr.SGList, swr.SGList = sg, sg
	var id uint64

	sq := &wqView{func() uint32 { return r.fqp.SendStats().Head }, func(i uint32) [fakeprov.WQEBytes]byte {
		w := r.fqp.SendWQE(i)
		w[0], w[1], w[2] = 0, 0, 0 // counter << 8 | opcode, big-endian
		return w
	}}
	rq := &wqView{func() uint32 { return r.fqp.RecvStats().Head }, r.fqp.RecvWQE}
	srq := &wqView{func() uint32 { return r.fsrq.Stats().Head }, r.fsrq.WQE}

	emptyPost := func(iters int) {
		for range iters {
			cbench.EmptyPost(base)
		}
	}
	emptyRDMA := func(f func(unsafe.Pointer) error) func(iters int) {
		return func(iters int) {
			for range iters {
				f(base)
			}
		}
	}
	cases := []genCase{
		{name: "post_recv", n: 1, empty: emptyPost, q: rq, goSide: func(iters int) error {
			for range iters {
				*sg = benchSGE(0)
				rwr.WRID, rwr.NumSGE = id, 1
				id++
				var bad *verbs.RecvWR
				if err := verbs.PostRecv(r.qp, rwr, &bad); err != nil {
					return err
				}
			}
			return nil
		}, cSide: func(iters int) error { return cbench.PostRecv(r.fqp.Ptr(), 1, iters) }},

		{name: "post_srq_recv", n: 1, empty: emptyPost, q: srq, goSide: func(iters int) error {
			for range iters {
				*sg = benchSGE(0)
				rwr.WRID, rwr.NumSGE = id, 1
				id++
				var bad *verbs.RecvWR
				if err := verbs.PostSRQRecv(r.srq, rwr, &bad); err != nil {
					return err
				}
			}
			return nil
		}, cSide: func(iters int) error { return cbench.PostSRQRecv(r.fsrq.Ptr(), 1, iters) }},

		{name: "post_send_send", n: 1, empty: emptyPost, q: sq, goSide: func(iters int) error {
			for range iters {
				*sg = benchSGE(0)
				swr.WRID, swr.NumSGE, swr.Opcode, swr.SendFlags, swr.ImmData = id, 1, verbs.WROpSend, cbench.Signaled, 0
				id++
				var bad *verbs.SendWR
				if err := verbs.PostSend(r.qp, swr, &bad); err != nil {
					return err
				}
			}
			return nil
		}, cSide: func(iters int) error { return cbench.PostSend(r.fqp.Ptr(), cbench.Send, nil, 1, iters) }},

		{name: "rdma_post_recvv", n: 1, empty: emptyRDMA(cbench.EmptyRDMA4), q: rq, goSide: func(iters int) error {
			for range iters {
				*sg = benchSGE(0)
				if err := rdmacm.PostRecvv(cm, ctx(id), sg, 1); err != nil {
					return err
				}
				id++
			}
			return nil
		}, cSide: func(iters int) error { return cbench.RDMAPost(unsafe.Pointer(cm), cbench.Recvv, 1, iters) }},

		{name: "rdma_post_sendv", n: 1, empty: emptyRDMA(cbench.EmptyRDMA5), q: sq, goSide: func(iters int) error {
			for range iters {
				*sg = benchSGE(0)
				if err := rdmacm.PostSendv(cm, ctx(id), sg, 1, cbench.Signaled); err != nil {
					return err
				}
				id++
			}
			return nil
		}, cSide: func(iters int) error { return cbench.RDMAPost(unsafe.Pointer(cm), cbench.Sendv, 1, iters) }},

		{name: "rdma_post_readv", n: 1, empty: emptyRDMA(cbench.EmptyRDMA7), q: sq, goSide: func(iters int) error {
			for range iters {
				*sg = benchSGE(0)
				if err := rdmacm.PostReadv(cm, ctx(id), sg, 1, cbench.Signaled, raddr(0), cbench.RKey); err != nil {
					return err
				}
				id++
			}
			return nil
		}, cSide: func(iters int) error { return cbench.RDMAPost(unsafe.Pointer(cm), cbench.Readv, 1, iters) }},

		{name: "rdma_post_writev", n: 1, empty: emptyRDMA(cbench.EmptyRDMA7), q: sq, goSide: func(iters int) error {
			for range iters {
				*sg = benchSGE(0)
				if err := rdmacm.PostWritev(cm, ctx(id), sg, 1, cbench.Signaled, raddr(0), cbench.RKey); err != nil {
					return err
				}
				id++
			}
			return nil
		}, cSide: func(iters int) error { return cbench.RDMAPost(unsafe.Pointer(cm), cbench.Writev, 1, iters) }},
	}
	for _, n := range []int{1, 16} {
		cases = append(cases, genCase{name: "poll_cq", n: n, empty: func(iters int) {
			for range iters {
				cbench.EmptyPoll(base, n)
			}
		}, goSide: func(iters int) error {
			var sum uint64 // a local, as cb_poll's
			for range iters {
				got, err := verbs.PollCQ(pr.vcq, int32(n), wcs)
				if err != nil {
					return err
				}
				if got != n { // as cb_poll fails a short poll
					return fmt.Errorf("poll: %d completions, want %d", got, n)
				}
				// What cb_poll reads, in place: ranging over the
				// values would copy each 48-byte WC.
				ws := unsafe.Slice(wcs, got)
				for i := range ws {
					sum += ws[i].WRID + uint64(ws[i].Status)
				}
			}
			sink = sum
			return nil
		}, cSide: func(iters int) error { return cbench.Poll(pr.cq.Ptr(), n, iters) }})
	}
	return cases
}

// Each of BenchmarkGenerated's posts writes, from Go, the WQE its C loop
// writes (the WQE counter aside): the two sides of a case do the same
// work. Each poll reaps its n completions on both sides (a short poll
// fails either).
func TestGeneratedBenchPairs(t *testing.T) {
	names := map[string]bool{}
	for _, c := range generatedCases(t) {
		names[c.name] = true
		if c.q == nil {
			require.NoError(t, c.goSide(3), "%s/%d, Go", c.name, c.n)
			require.NoError(t, c.cSide(3), "%s/%d, C", c.name, c.n)
			continue
		}
		h := c.q.head()
		require.NoError(t, c.goSide(1), "%s, Go", c.name)
		goWQE := c.q.wqe(h)
		h = c.q.head()
		require.NoError(t, c.cSide(1), "%s, C", c.name)
		require.Equal(t, c.q.wqe(h), goWQE, "%s: the Go side's WQE against the C side's", c.name)
		require.NotEqual(t, [fakeprov.WQEBytes]byte{}, goWQE, c.name)
	}
	require.Equal(t, map[string]bool{"post_recv": true, "post_srq_recv": true, "post_send_send": true,
		"rdma_post_recvv": true, "rdma_post_sendv": true, "rdma_post_readv": true, "rdma_post_writev": true,
		"poll_cq": true}, names, "every generated data-path stub has its case")
}

// The poll_cq_ex benchmark's C side, cbench.PollEx over hand.c's own
// reader, reaps n completions per iteration and fails on a short poll.
func TestCBenchPollEx(t *testing.T) {
	r := newRig(t, rigOpts{})
	p, err := hand.NewExPollerRaw(r.vcqEx, 16, benchExFlags)
	require.NoError(t, err)
	defer p.Close()
	wc, ts, fail := p.Buffers()
	pollEx := func(iters int) error {
		return cbench.PollEx(hand.PollExReader(), r.cq.ExPtr(), wc, ts, fail, 16, iters, uint64(benchExFlags))
	}

	require.NoError(t, cbench.PostRecv(r.fqp.Ptr(), 16, 1))
	require.NoError(t, r.cq.SetEndless(true))
	require.NoError(t, pollEx(1000))
	require.Equal(t, uint64(16000), r.cq.Stats().Polled)
	var cIDs []uint64
	for _, w := range unsafe.Slice((*hand.WC)(wc), 16) {
		cIDs = append(cIDs, w.WRID())
	}
	wcs, err := p.Poll() // the CQ cycles through the same 16 in order
	require.NoError(t, err)
	var goIDs []uint64
	for _, w := range wcs {
		goIDs = append(goIDs, w.WRID())
	}
	require.Equal(t, goIDs, cIDs, "the C side reads into the poller's array")
	require.NoError(t, r.cq.SetEndless(false))
	require.ErrorIs(t, pollEx(1), syscall.EAGAIN, "an empty CQ is a short poll")
	r.cq.FailStartPollRaw(int(syscall.EBUSY))
	require.ErrorIs(t, pollEx(1), syscall.EBUSY, "a failure is the C side's errno")
	wcs, err = p.Poll()
	require.NoError(t, err, "and leaves the poller's slot clear")
	require.Empty(t, wcs)
}
