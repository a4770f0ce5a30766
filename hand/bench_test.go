package hand_test

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/hand/internal/cbench"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// The benchmarks pair each Go fast path (BenchmarkFast/<case>/<n>/go) with a
// C loop doing the same work over the same fake provider in the same run
// (BenchmarkFast/<case>/<n>/c, from hand/internal/cbench); `make bench` turns
// the pairs into ratio lines. Posts go to queues in Sink mode (WQEs written,
// doorbell rung, no completion), polls to a CQ that cycles through 64
// completions without running dry.
//
// Besides ns/op every benchmark reports cpu-ns/op, the process CPU time per
// op: on a machine shared with other work, time the scheduler hands to other
// processes inflates ns/op but not cpu-ns/op, which is what the ratio lines use.

// cpuClock is the CPU time the process has used (CLOCK_PROCESS_CPUTIME_ID).
func cpuClock() time.Duration {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 2 /* CLOCK_PROCESS_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// reportCPU reports the CPU time per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuClock()-start)/float64(b.N), "cpu-ns/op")
}

var (
	postSizes = []int{1, 8, 32, 64}
	pollSizes = []int{1, 16, 64}
)

// benchSGE is the scatter entry of WR i, as cbench's C loops fill it.
func benchSGE(i int) verbs.SGE {
	return verbs.SGE{Addr: cbench.Addr + uint64(i)*cbench.Len, Length: cbench.Len, Lkey: cbench.LKey}
}

func BenchmarkCgoEmpty(b *testing.B) {
	t0 := cpuClock()
	for range b.N {
		cbench.Empty()
	}
	reportCPU(b, t0)
}

// BenchmarkCgoEmptyPtr3 is an empty crossing with three pointer arguments
// (to C memory), as verbs.PostRecv makes one: cgo checks each for Go pointers.
func BenchmarkCgoEmptyPtr3(b *testing.B) {
	p := newRig(b, rigOpts{}).fqp.Ptr()
	t0 := cpuClock()
	for range b.N {
		cbench.EmptyPtr3(p, p, p)
	}
	reportCPU(b, t0)
}

// pair runs the Go and the C side of one case.
func pair(b *testing.B, name string, n int, goSide func(b *testing.B), cSide func(iters int) error) {
	b.Run(fmt.Sprintf("%s/%d/go", name, n), goSide)
	b.Run(fmt.Sprintf("%s/%d/c", name, n), func(b *testing.B) {
		t0 := cpuClock()
		if err := cSide(b.N); err != nil {
			b.Fatal(err)
		}
		reportCPU(b, t0)
	})
}

func BenchmarkFast(b *testing.B) {
	r := sinkRig(b, fakeprov.RC)
	ud := sinkRig(b, fakeprov.UD)
	id := r.cmID(b, false)

	for _, n := range postSizes {
		pair(b, "post_recv", n, benchRecv(n, func(c *hand.RecvChain) error { return c.PostRecv(r.qp) }),
			func(iters int) error { return cbench.PostRecv(r.fqp.Ptr(), n, iters) })
	}
	for _, n := range postSizes {
		pair(b, "post_srq_recv", n, benchRecv(n, func(c *hand.RecvChain) error { return c.PostSRQRecv(r.srq) }),
			func(iters int) error { return cbench.PostSRQRecv(r.fsrq.Ptr(), n, iters) })
	}
	for _, k := range sendKinds {
		rr := r
		if k.kind == cbench.UD {
			rr = ud
		}
		for _, n := range postSizes {
			pair(b, "post_send_"+k.name, n, benchSend(n, rr, k.kind, func(c *hand.SendChain) error { return c.PostSend(rr.qp) }),
				func(iters int) error { return cbench.PostSend(rr.fqp.Ptr(), k.kind, unsafe.Pointer(rr.ah), n, iters) })
		}
	}
	for _, n := range postSizes {
		pair(b, "rdma_post_recvv", n, benchRecv(n, func(c *hand.RecvChain) error { return c.PostRecvv(id) }),
			func(iters int) error { return cbench.RDMAPost(unsafe.Pointer(id), cbench.Recvv, n, iters) })
	}
	for _, v := range []struct {
		name string
		kind cbench.RDMAKind
		fill cbench.SendKind
		post func(c *hand.SendChain) error
	}{
		{"rdma_post_sendv", cbench.Sendv, cbench.Send, func(c *hand.SendChain) error { return c.PostSendv(id) }},
		{"rdma_post_readv", cbench.Readv, cbench.Read, func(c *hand.SendChain) error { return c.PostReadv(id) }},
		{"rdma_post_writev", cbench.Writev, cbench.Write, func(c *hand.SendChain) error { return c.PostWritev(id) }},
	} {
		for _, n := range postSizes {
			pair(b, v.name, n, benchSend(n, r, v.fill, v.post),
				func(iters int) error { return cbench.RDMAPost(unsafe.Pointer(id), v.kind, n, iters) })
		}
	}

	pr := pollRig(b)
	for _, n := range pollSizes {
		pair(b, "poll_cq", n, benchPoll(n, func() (func() ([]hand.WC, error), func()) {
			p, err := hand.NewPoller(pr.vcq, n)
			require.NoError(b, err)
			return p.Poll, p.Free
		}), func(iters int) error { return cbench.Poll(pr.cq.Ptr(), n, iters) })
	}
	for _, n := range pollSizes {
		pair(b, "poll_cq_ex", n, benchPoll(n, func() (func() ([]hand.WC, error), func()) {
			p, err := hand.NewExPoller(pr.vcqEx, n, benchExFlags)
			require.NoError(b, err)
			return p.Poll, p.Free
		}), func(iters int) error { return cbench.PollEx(pr.cq.ExPtr(), n, iters, uint64(benchExFlags)) })
	}
}

// benchExFlags are the fields the extended poll benchmarks read: the
// standard set of ibv_poll_cq.
const benchExFlags = verbs.CreateCQWCFlags(verbs.WCStandardFlags)

// Not inlined: the closure of an inlined copy loses the inlining of its callees.
//
//go:noinline
func benchRecv(n int, post func(c *hand.RecvChain) error) func(b *testing.B) {
	return func(b *testing.B) {
		c, err := hand.NewRecvChain(n, 1)
		require.NoError(b, err)
		defer c.Free()
		var id uint64
		b.ResetTimer()
		t0 := cpuClock()
		for range b.N {
			v := c.Reserve(n)
			for i := 0; i < n; i++ {
				v.Set(i, id, benchSGE(i))
				id++
			}
			if err := post(c); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, t0)
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
// does (the same switch inside the loop), and posts them.
//
//go:noinline
func benchSend(n int, r *rig, kind cbench.SendKind, post func(c *hand.SendChain) error) func(b *testing.B) {
	return func(b *testing.B) {
		c, err := hand.NewSendChain(n, 1, cbench.InlineLen)
		require.NoError(b, err)
		defer c.Free()
		ah := r.ah
		var id uint64
		b.ResetTimer()
		t0 := cpuClock()
		for range b.N {
			v := c.Reserve(n)
			for i := 0; i < n; i++ {
				s := benchSGE(i)
				raddr := cbench.RAddr + uint64(i)*cbench.Len
				switch kind {
				case cbench.Send:
					v.SetSend(i, id, verbs.SendSignaled, s)
				case cbench.SendImm:
					v.SetSendImm(i, id, verbs.SendSignaled, uint32(i), s)
				case cbench.Write:
					v.SetWrite(i, id, verbs.SendSignaled, s, raddr, cbench.RKey)
				case cbench.WriteImm:
					v.SetWriteImm(i, id, verbs.SendSignaled, uint32(i), s, raddr, cbench.RKey)
				case cbench.Read:
					v.SetRead(i, id, verbs.SendSignaled, s, raddr, cbench.RKey)
				case cbench.CAS:
					s.Length = 8
					v.SetCompareSwap(i, id, verbs.SendSignaled, s, raddr, cbench.RKey, uint64(i), uint64(i)+1)
				case cbench.FAA:
					s.Length = 8
					v.SetFetchAdd(i, id, verbs.SendSignaled, s, raddr, cbench.RKey, 1)
				case cbench.Inline:
					v.SetInline(i, id, verbs.SendSignaled, inlineData)
				case cbench.UD:
					v.SetUD(i, id, verbs.SendSignaled, s, ah, cbench.RemoteQPN, cbench.QKey)
				}
				id++
			}
			if err := post(c); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, t0)
	}
}

// pollRig has 64 completions on its CQ that polling cycles through forever.
func pollRig(b *testing.B) *rig {
	r := newRig(b, rigOpts{})
	c, err := hand.NewRecvChain(64, 1)
	require.NoError(b, err)
	defer c.Free()
	v := c.Reserve(64)
	for i := 0; i < 64; i++ {
		v.Set(i, uint64(i), benchSGE(i))
	}
	require.NoError(b, c.PostRecv(r.qp))
	require.NoError(b, r.cq.SetEndless(true))
	return r
}

// Not inlined: the closure of an inlined copy loses the inlining of its callees.
//
//go:noinline
func benchPoll(n int, mk func() (func() ([]hand.WC, error), func())) func(b *testing.B) {
	return func(b *testing.B) {
		poll, free := mk()
		defer free()
		var sum uint64
		b.ResetTimer()
		t0 := cpuClock()
		for range b.N {
			wcs, err := poll()
			if err != nil || len(wcs) != n {
				b.Fatalf("poll: %d completions, %v", len(wcs), err)
			}
			for i := range wcs {
				sum += wcs[i].WRID() + uint64(wcs[i].Status())
			}
		}
		reportCPU(b, t0)
		sink = sum
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
				rc := verbs.PostRecv(r.qp, &wrs[0], &bad)
				pin.Unpin()
				if rc != 0 {
					b.Fatal(rc)
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
				got := verbs.PollCQ(pr.vcq, int32(n), &wc[0])
				for i := range got {
					sum += wc[i].WRID
				}
			}
			reportCPU(b, t0)
			sink = sum
		})
	}
}
