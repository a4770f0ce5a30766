package hand_test

import (
	"errors"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
	"github.com/goverbs/goverbs/verberr"
)

// Every entry point of the fast path, filled and posted (or polled) the way
// an application does it, must not allocate.

const allocChain = 32

// sinkRig posts into queues that release their WQEs at once, so posting can
// go on forever.
func sinkRig(t testing.TB, typ int) *rig {
	r := newRig(t, rigOpts{typ: typ})
	r.fqp.SetRecvMode(fakeprov.Sink)
	r.fqp.SetSendMode(fakeprov.Sink)
	r.fsrq.SetMode(fakeprov.Sink)
	return r
}

func requireNoAllocs(t *testing.T, name string, f func()) {
	t.Helper()
	f() // warm up: the first call may fill lazily initialized state
	require.Zero(t, testing.AllocsPerRun(200, f), "%s allocates", name)
}

func TestNoAllocsRecv(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	c, err := hand.NewRecvChain(allocChain, 1)
	require.NoError(t, err)
	defer c.Close()
	id := r.cmID(t, false)
	fill := func() {
		for i := 0; i < allocChain; i++ {
			c.Reserve(1).Set(0, uint64(i), sge(i))
		}
	}
	requireNoAllocs(t, "PostRecv", func() { fill(); must(t, c.PostRecvRaw(r.qp)) })
	requireNoAllocs(t, "PostSRQRecv", func() { fill(); must(t, c.PostSRQRecvRaw(r.srq)) })
	requireNoAllocs(t, "PostRecvv", func() { fill(); must(t, c.PostRecvvRaw(id)) })
}

func TestNoAllocsSend(t *testing.T) {
	const raddr, rkey = 0x200000, 0x5678
	sig := hand.Signaled
	data := []byte("0123456789abcdef")
	remote := remoteAt(raddr, rkey)
	big, err := hand.NewRemoteBuffer(raddr, allocChain*64, rkey)
	require.NoError(t, err)
	allocMW, allocMR, _, _ := mwOnPage(t, hand.MWType2, 0x4200)
	for _, tc := range []struct {
		name string
		add  func(c *hand.SendChain, r *rig, i int)
		ud   bool
	}{
		{"send", func(c *hand.SendChain, r *rig, i int) { c.Reserve(1).SetSend(0, uint64(i), sig, sge(i)) }, false},
		{"send_imm", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetSendImm(0, uint64(i), sig, uint32(i), sge(i))
		}, false},
		{"write", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetWrite(0, uint64(i), sig, sge(i), raddr, rkey)
		}, false},
		{"write_imm", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetWriteImm(0, uint64(i), sig, uint32(i), sge(i), raddr, rkey)
		}, false},
		{"read", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetRead(0, uint64(i), sig, sge(i), raddr, rkey)
		}, false},
		{"write_to", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetWriteTo(0, uint64(i), sig, sge(i), remote)
		}, false},
		{"write_imm_to", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetWriteImmTo(0, uint64(i), sig, uint32(i), sge(i), remote)
		}, false},
		{"read_from", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetReadFrom(0, uint64(i), sig, sge(i), remote)
		}, false},
		{"write_to_slice", func(c *hand.SendChain, r *rig, i int) {
			// A part of the peer's buffer per WR, as a program that
			// spreads a transfer over the advertised buffer does.
			part, err := big.Slice(i*64, 64)
			if err != nil {
				panic(err)
			}
			c.Reserve(1).SetWriteTo(0, uint64(i), sig, sge(i), part)
		}, false},
		{"cas", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetCompareSwap(0, uint64(i), sig, sge(i), raddr, rkey, 1, 2)
		}, false},
		{"faa", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetFetchAdd(0, uint64(i), sig, sge(i), raddr, rkey, 1)
		}, false},
		{"inline", func(c *hand.SendChain, r *rig, i int) { c.Reserve(1).SetInline(0, uint64(i), sig, data) }, false},
		{"bind_mw", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetBindMW(0, uint64(i), sig, allocMW, allocMR, 64*i, 64, hand.AccessRemoteWrite)
		}, false},
		{"local_inv", func(c *hand.SendChain, r *rig, i int) { c.Reserve(1).SetLocalInv(0, uint64(i), sig, rkey) }, false},
		{"send_inv", func(c *hand.SendChain, r *rig, i int) { c.Reserve(1).SetSendInv(0, uint64(i), sig, sge(i), rkey) }, false},
		{"unsignaled", func(c *hand.SendChain, r *rig, i int) { c.Reserve(1).SetSend(0, uint64(i), 0, sge(i)) }, false},
		{"ud", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetUD(0, uint64(i), sig, sge(i), r.hah, 0x42, 0x1111)
		}, true},
		{"ud_imm", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetUDImm(0, uint64(i), sig, 5, sge(i), r.hah, 0x42, 0x1111)
		}, true},
	} {
		typ := fakeprov.RC
		if tc.ud {
			typ = fakeprov.UD
		}
		r := sinkRig(t, typ)
		c, err := hand.NewSendChain(allocChain, 1, 16)
		require.NoError(t, err)
		requireNoAllocs(t, "PostSend "+tc.name, func() {
			for i := 0; i < allocChain; i++ {
				tc.add(c, r, i)
			}
			must(t, c.PostSendRaw(r.qp))
		})
		c.Close()
	}

	r := sinkRig(t, fakeprov.RC)
	id := r.cmID(t, false)
	c, err := hand.NewSendChain(allocChain, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	conn := hand.ConnOnID(id)
	sends := func() {
		for i := 0; i < allocChain; i++ {
			c.Reserve(1).SetSend(0, uint64(i), sig, sge(i))
		}
	}
	reads := func() {
		for i := 0; i < allocChain; i++ {
			c.Reserve(1).SetRead(0, uint64(i), sig, sge(i), raddr, rkey)
		}
	}
	writes := func() {
		for i := 0; i < allocChain; i++ {
			c.Reserve(1).SetWrite(0, uint64(i), sig, sge(i), raddr, rkey)
		}
	}
	requireNoAllocs(t, "PostSendvRaw", func() { sends(); must(t, c.PostSendvRaw(id)) })
	requireNoAllocs(t, "PostReadvRaw", func() { reads(); must(t, c.PostReadvRaw(id)) })
	requireNoAllocs(t, "PostWritevRaw", func() { writes(); must(t, c.PostWritevRaw(id)) })
	requireNoAllocs(t, "PostSendv", func() { sends(); must(t, c.PostSendv(conn)) })
	requireNoAllocs(t, "PostReadv", func() { reads(); must(t, c.PostReadv(conn)) })
	requireNoAllocs(t, "PostWritev", func() { writes(); must(t, c.PostWritev(conn)) })
	// A refused chain (reads given to rdma_post_writev) is a bug in the
	// caller, but its error is the chain's own, reused, as a PostError is.
	requireNoAllocs(t, "PostWritevRaw refusing a read", func() {
		reads()
		if err := c.PostWritevRaw(id); !isOpcodeError(err) {
			t.Fatalf("PostWritevRaw of reads: %v, want an *OpcodeError", err)
		}
		c.Reset()
	})
}

func TestNoAllocsPartialPost(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	c, err := hand.NewRecvChain(8, 1)
	require.NoError(t, err)
	defer c.Close()
	requireNoAllocs(t, "PostRecv failing mid-chain", func() {
		c.Reset()
		for i := 0; i < 8; i++ {
			c.Reserve(1).Set(0, uint64(i), sge(i))
		}
		r.fqp.FailRecv(4, 11)
		if c.PostRecvRaw(r.qp) == nil {
			t.Fatal("no PostError")
		}
	})
}

func TestNoAllocsPoll(t *testing.T) {
	r := newRig(t, rigOpts{})
	postRecvs(t, r, 0, 64)
	require.NoError(t, r.cq.SetEndless(true))
	p, err := hand.NewPollerRaw(r.vcq, 16)
	require.NoError(t, err)
	defer p.Close()
	x, err := hand.NewExPollerRaw(r.vcqEx, 16, allFlags)
	require.NoError(t, err)
	defer x.Close()
	var sum uint64
	consume := func(wcs []hand.WC, err error) {
		if err != nil || len(wcs) != 16 {
			t.Fatalf("poll: %d, %v", len(wcs), err)
		}
		for i := range wcs {
			w := &wcs[i]
			sum += w.WRID() + uint64(w.ByteLen())
			if err := w.Err(); err != nil {
				sum += uint64(err.(hand.StatusError))
			}
		}
	}
	requireNoAllocs(t, "Poll", func() { consume(p.Poll()) })
	requireNoAllocs(t, "ExPoller.Poll", func() { consume(x.Poll()) })
	requireNoAllocs(t, "PollSpin", func() {
		r.cq.HoldPolls(3)
		consume(p.PollSpin(8))
	})
	requireNoAllocs(t, "ExPoller.PollSpin", func() {
		r.cq.HoldPolls(3)
		consume(x.PollSpin(8))
	})

	failing := func(wcs []hand.WC, err error) {
		if err == nil || wcs != nil {
			t.Fatalf("poll: %d, %v; want no completion and an error", len(wcs), err)
		}
	}
	requireNoAllocs(t, "ExPoller.Poll failing at ibv_start_poll", func() {
		r.cq.FailStartPollRaw(-2)
		failing(x.Poll())
	})
	requireNoAllocs(t, "ExPoller.PollSpin failing at ibv_start_poll", func() {
		r.cq.FailStartPollRaw(-2)
		failing(x.PollSpin(8))
	})
	requireNoAllocs(t, "ExPoller.Poll failing at ibv_next_poll", func() {
		r.cq.FailNextPollRaw(-2)
		if wcs, err := x.Poll(); err != nil || len(wcs) != 1 {
			t.Fatalf("poll: %d, %v; want the completion before the failure", len(wcs), err)
		}
		failing(x.PollSpin(8))
	})

	r.cq.InjectStatus(1<<30, int(verbs.WCRemAccessErr), 1)
	require.NoError(t, r.cq.SetEndless(false))
	postRecvs(t, r, 0, 64)
	require.NoError(t, r.cq.SetEndless(true))
	requireNoAllocs(t, "Poll of error completions and Err", func() { consume(p.Poll()) })
	require.NotZero(t, sum)
}

// isOpcodeError is a type assertion where errors.As would allocate its target.
func isOpcodeError(err error) bool {
	_, ok := err.(*hand.OpcodeError)
	return ok
}

func must(t *testing.T, err error) {
	if err != nil {
		t.Fatal(err)
	}
}

// The generated data-path stubs (package verbs, called directly as a user
// of the generated layer would) allocate nothing either: not on success,
// and not on a failure they have reported before, whose error is kept by
// its verberr.Site. The WRs, SGEs and completions live in an anonymous
// mapping (not the Go heap), as the no-Go-pointer rule asks; the bad_wr
// slot is a local whose address #cgo noescape keeps on the stack.
func TestNoAllocsGeneratedStubs(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	mem, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Munmap(mem) })
	base := unsafe.Pointer(&mem[0])
	sg := (*verbs.SGE)(base)
	*sg = sge(0)
	rwr := (*verbs.RecvWR)(unsafe.Add(base, 64))
	*rwr = verbs.RecvWR{WRID: 1, SGList: sg, NumSGE: 1}
	swr := (*verbs.SendWR)(unsafe.Add(base, 256))
	*swr = verbs.SendWR{WRID: 2, SGList: sg, NumSGE: 1, Opcode: verbs.WROpSend}
	wc := (*verbs.WC)(unsafe.Add(base, 1024))

	requireNoAllocs(t, "verbs.PostRecv", func() {
		var bad *verbs.RecvWR
		must(t, verbs.PostRecv(r.qp, rwr, &bad))
	})
	requireNoAllocs(t, "verbs.PostSRQRecv", func() {
		var bad *verbs.RecvWR
		must(t, verbs.PostSRQRecv(r.srq, rwr, &bad))
	})
	requireNoAllocs(t, "verbs.PostSend", func() {
		var bad *verbs.SendWR
		must(t, verbs.PostSend(r.qp, swr, &bad))
	})
	requireNoAllocs(t, "verbs.PollCQ", func() {
		if n, err := verbs.PollCQ(r.vcq, 1, wc); n != 0 || err != nil {
			t.Fatalf("PollCQ on an empty CQ = %d, %v", n, err)
		}
	})

	// A failure: the provider refuses the WR with ENOMEM (queue full).
	requireNoAllocs(t, "verbs.PostRecv failing", func() {
		r.fqp.FailRecv(0, syscall.ENOMEM)
		var bad *verbs.RecvWR
		err := verbs.PostRecv(r.qp, rwr, &bad)
		if !errors.Is(err, syscall.ENOMEM) || bad != rwr {
			t.Fatalf("PostRecv with the provider refusing = %v, bad_wr %p; want ENOMEM and %p", err, bad, rwr)
		}
	})
	var bad *verbs.SendWR
	r.fqp.FailSend(0, syscall.EINVAL)
	err = verbs.PostSend(r.qp, swr, &bad)
	var ve *verberr.Error
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "ibv_post_send", ve.Func())
	require.EqualError(t, err, "ibv_post_send: invalid argument (EINVAL)")
}

// A RemoteBuffer goes to and from its 16 bytes, and is sliced, once an
// operation in a program like rping: none of that allocates (Slice only
// when it fails, AppendBinary only when b has no room).
func TestNoAllocsRemoteBuffer(t *testing.T) {
	r, err := hand.NewRemoteBuffer(0x7f0000001000, 4096, 0x1234)
	require.NoError(t, err)
	var wire [hand.RemoteBufferSize]byte
	var back hand.RemoteBuffer
	requireNoAllocs(t, "RemoteBuffer round trip", func() {
		part, err := r.Slice(64, 128)
		must(t, err)
		if _, err := part.AppendBinary(wire[:0]); err != nil {
			t.Fatal(err)
		}
		must(t, back.UnmarshalBinary(wire[:]))
		if back != part {
			t.Fatalf("%v came back as %v", part, back)
		}
	})
}
