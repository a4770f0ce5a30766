package hand_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// A chain is for one goroutine at a time. Here one goroutine's post is
// held inside the fake provider (fakeprov's Hold) while the test's
// goroutine calls every post method and Close of the same chain: each must
// return an error matching ErrConcurrentUse that names the method, post
// nothing and free nothing, and the held post must then complete with
// exactly its own WRs on the queue. Without the chain's in-use word the
// second post would run into the provider beside the first and post the
// same WRs again.

// holdCall runs call on a goroutine of its own and returns once the fake
// provider holds it; the returned function releases it and returns what
// it returned.
func holdCall(t *testing.T, p *fakeprov.Provider, call func() error) (release func() error) {
	t.Helper()
	p.Hold()
	done := make(chan error, 1)
	go func() { done <- call() }()
	require.Eventually(t, p.Held, 10*time.Second, 100*time.Microsecond, "the call never reached the provider")
	return func() error {
		p.Release()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the held call did not return once released")
			return nil
		}
	}
}

// requireUsed asserts err is a refusal for concurrent use from method.
func requireUsed(t *testing.T, err error, method string) {
	t.Helper()
	require.ErrorIs(t, err, hand.ErrConcurrentUse, "%s while another goroutine is in a call", method)
	require.Contains(t, err.Error(), "goverbs: "+method+": another goroutine is in a call of this")
}

func TestRecvChainConcurrentUseFails(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	qp, srq := hand.QPOn(r.qp), hand.SRQOn(r.srq)
	id, idSRQ := r.cmID(t, false), r.cmID(t, true)
	conn := hand.ConnOnID(id)
	rq := func() uint64 { return r.fqp.RecvStats().Posted }
	srqPosted := func() uint64 { return r.fsrq.Stats().Posted }
	posts := []struct {
		name   string
		post   func(c *hand.RecvChain) error
		posted func() uint64 // WRs on the queue it posts to
	}{
		{"PostRecv", func(c *hand.RecvChain) error { return c.PostRecv(qp) }, rq},
		{"PostRecvRaw", func(c *hand.RecvChain) error { return c.PostRecvRaw(r.qp) }, rq},
		{"PostSRQRecv", func(c *hand.RecvChain) error { return c.PostSRQRecv(srq) }, srqPosted},
		{"PostSRQRecvRaw", func(c *hand.RecvChain) error { return c.PostSRQRecvRaw(r.srq) }, srqPosted},
		{"PostRecvv", func(c *hand.RecvChain) error { return c.PostRecvv(conn) }, rq},
		{"PostRecvvRaw", func(c *hand.RecvChain) error { return c.PostRecvvRaw(idSRQ) }, srqPosted},
	}
	c, err := hand.NewRecvChain(8, 1)
	require.NoError(t, err)
	defer c.Close()
	const k = 5
	for _, held := range posts {
		t.Run(held.name, func(t *testing.T) {
			v := c.Reserve(k)
			for i := range k {
				v.Set(i, uint64(i), sge(i))
			}
			before := held.posted()
			release := holdCall(t, r.p, func() error { return held.post(c) })
			for _, other := range posts {
				requireUsed(t, other.post(c), "RecvChain."+other.name)
			}
			requireUsed(t, c.Close(), "RecvChain.Close")
			require.NoError(t, release(), "the held post")
			require.Equal(t, uint64(k), held.posted()-before, "WRs posted: the held post's, and none of the refused ones")
			require.Zero(t, c.Len(), "the held post emptied the chain")
		})
	}
}

func TestSendChainConcurrentUseFails(t *testing.T) {
	const raddr, rkey = 0x200000, 0x5678
	r := sinkRig(t, fakeprov.RC)
	qp := hand.QPOn(r.qp)
	id := r.cmID(t, false)
	conn := hand.ConnOnID(id)
	sends := func(v hand.SendWRs) {
		for i := range v.Len() {
			v.SetSend(i, uint64(i), sig, sge(i))
		}
	}
	reads := func(v hand.SendWRs) {
		for i := range v.Len() {
			v.SetRead(i, uint64(i), sig, sge(i), raddr, rkey)
		}
	}
	writes := func(v hand.SendWRs) {
		for i := range v.Len() {
			v.SetWrite(i, uint64(i), sig, sge(i), raddr, rkey)
		}
	}
	posts := []struct {
		name string
		fill func(v hand.SendWRs)
		post func(c *hand.SendChain) error
	}{
		{"PostSend", reads, func(c *hand.SendChain) error { return c.PostSend(qp) }},
		{"PostSendRaw", writes, func(c *hand.SendChain) error { return c.PostSendRaw(r.qp) }},
		{"PostSendv", sends, func(c *hand.SendChain) error { return c.PostSendv(conn) }},
		{"PostSendvRaw", sends, func(c *hand.SendChain) error { return c.PostSendvRaw(id) }},
		{"PostReadv", reads, func(c *hand.SendChain) error { return c.PostReadv(conn) }},
		{"PostReadvRaw", reads, func(c *hand.SendChain) error { return c.PostReadvRaw(id) }},
		{"PostWritev", writes, func(c *hand.SendChain) error { return c.PostWritev(conn) }},
		{"PostWritevRaw", writes, func(c *hand.SendChain) error { return c.PostWritevRaw(id) }},
	}
	c, err := hand.NewSendChain(8, 1, 16)
	require.NoError(t, err)
	defer c.Close()
	const k = 5
	for _, held := range posts {
		t.Run(held.name, func(t *testing.T) {
			held.fill(c.Reserve(k))
			before := r.fqp.SendStats().Posted
			release := holdCall(t, r.p, func() error { return held.post(c) })
			for _, other := range posts {
				requireUsed(t, other.post(c), "SendChain."+other.name)
			}
			requireUsed(t, c.Close(), "SendChain.Close")
			require.NoError(t, release(), "the held post")
			require.Equal(t, uint64(k), r.fqp.SendStats().Posted-before, "WRs posted: the held post's, and none of the refused ones")
			require.Zero(t, c.Len(), "the held post emptied the chain")
		})
	}
}

// The in-use word is the chain's own: a post of another chain to the same
// QP while one is held goes through, as the package documentation promises
// (several goroutines may post to one QP, each with a chain of its own).
func TestChainsOnOneQPDoNotConflict(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	a, err := hand.NewSendChain(4, 1, 0)
	require.NoError(t, err)
	defer a.Close()
	b, err := hand.NewSendChain(4, 1, 0)
	require.NoError(t, err)
	defer b.Close()
	for _, c := range []*hand.SendChain{a, b} {
		v := c.Reserve(4)
		for i := range 4 {
			v.SetSend(i, uint64(i), sig, sge(i))
		}
	}
	before := r.fqp.SendStats().Posted
	release := holdCall(t, r.p, func() error { return a.PostSendRaw(r.qp) })
	require.NoError(t, b.PostSendRaw(r.qp), "another chain's post while one is held")
	require.NoError(t, release())
	require.Equal(t, uint64(8), r.fqp.SendStats().Posted-before)
}

// The refusal allocates nothing, as the posts do not: its errors are made
// once, one per method.
func TestConcurrentUseRefusalAllocates(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	c, err := hand.NewSendChain(4, 1, 0)
	require.NoError(t, err)
	defer c.Close()
	c.Reserve(1).SetSend(0, 1, sig, sge(0))
	release := holdCall(t, r.p, func() error { return c.PostSendRaw(r.qp) })
	var refused error
	require.Zero(t, testing.AllocsPerRun(100, func() { refused = c.PostSendRaw(r.qp) }), "a refused post allocates")
	require.True(t, errors.Is(refused, hand.ErrConcurrentUse), "%v", refused)
	require.NoError(t, release())
}
