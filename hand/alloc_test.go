package hand_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
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
	defer c.Free()
	id := r.cmID(t, false)
	fill := func() {
		for i := 0; i < allocChain; i++ {
			c.Reserve(1).Set(0, uint64(i), sge(i))
		}
	}
	requireNoAllocs(t, "PostRecv", func() { fill(); must(t, c.PostRecv(r.qp)) })
	requireNoAllocs(t, "PostSRQRecv", func() { fill(); must(t, c.PostSRQRecv(r.srq)) })
	requireNoAllocs(t, "PostRecvv", func() { fill(); must(t, c.PostRecvv(id)) })
}

func TestNoAllocsSend(t *testing.T) {
	const raddr, rkey = 0x200000, 0x5678
	sig := verbs.SendSignaled
	data := []byte("0123456789abcdef")
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
		{"cas", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetCompareSwap(0, uint64(i), sig, sge(i), raddr, rkey, 1, 2)
		}, false},
		{"faa", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetFetchAdd(0, uint64(i), sig, sge(i), raddr, rkey, 1)
		}, false},
		{"inline", func(c *hand.SendChain, r *rig, i int) { c.Reserve(1).SetInline(0, uint64(i), sig, data) }, false},
		{"unsignaled", func(c *hand.SendChain, r *rig, i int) { c.Reserve(1).SetSend(0, uint64(i), 0, sge(i)) }, false},
		{"ud", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetUD(0, uint64(i), sig, sge(i), r.ah, 0x42, 0x1111)
		}, true},
		{"ud_imm", func(c *hand.SendChain, r *rig, i int) {
			c.Reserve(1).SetUDImm(0, uint64(i), sig, 5, sge(i), r.ah, 0x42, 0x1111)
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
			must(t, c.PostSend(r.qp))
		})
		c.Free()
	}

	r := sinkRig(t, fakeprov.RC)
	id := r.cmID(t, false)
	c, err := hand.NewSendChain(allocChain, 1, 0)
	require.NoError(t, err)
	defer c.Free()
	fill := func() {
		for i := 0; i < allocChain; i++ {
			c.Reserve(1).SetRead(0, uint64(i), sig, sge(i), raddr, rkey)
		}
	}
	requireNoAllocs(t, "PostSendv", func() { fill(); must(t, c.PostSendv(id)) })
	requireNoAllocs(t, "PostReadv", func() { fill(); must(t, c.PostReadv(id)) })
	requireNoAllocs(t, "PostWritev", func() { fill(); must(t, c.PostWritev(id)) })
}

func TestNoAllocsPartialPost(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	c, err := hand.NewRecvChain(8, 1)
	require.NoError(t, err)
	defer c.Free()
	requireNoAllocs(t, "PostRecv failing mid-chain", func() {
		c.Reset()
		for i := 0; i < 8; i++ {
			c.Reserve(1).Set(0, uint64(i), sge(i))
		}
		r.fqp.FailRecv(4, 11)
		if c.PostRecv(r.qp) == nil {
			t.Fatal("no PostError")
		}
	})
}

func TestNoAllocsPoll(t *testing.T) {
	r := newRig(t, rigOpts{})
	postRecvs(t, r, 0, 64)
	require.NoError(t, r.cq.SetEndless(true))
	p, err := hand.NewPoller(r.vcq, 16)
	require.NoError(t, err)
	defer p.Free()
	x, err := hand.NewExPoller(r.vcqEx, 16, allFlags)
	require.NoError(t, err)
	defer x.Free()
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

	r.cq.InjectStatus(1<<30, int(verbs.WCRemAccessErr), 1)
	require.NoError(t, r.cq.SetEndless(false))
	postRecvs(t, r, 0, 64)
	require.NoError(t, r.cq.SetEndless(true))
	requireNoAllocs(t, "Poll of error completions and Err", func() { consume(p.Poll()) })
	require.NotZero(t, sum)
}

func must(t *testing.T, err error) {
	if err != nil {
		t.Fatal(err)
	}
}
