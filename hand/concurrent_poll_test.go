package hand

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// A poller is for one goroutine at a time, and the race detector cannot
// tell when two share one: a poll writes only the WC array, in C memory.
// Here one goroutine's Poll, PollSpin or Wait is held inside the fake
// provider (fakeprov's Hold) while the test's goroutine calls every method
// of the same poller that polls, waits or frees: each must return an
// error matching ErrConcurrentUse that names the method, reap nothing and
// free nothing, and the held call must then return the completions it
// reaped, none of them taken by the refused calls. (In package hand for a
// CQ with a completion channel, which Wait needs, without a device; the
// wait parked in the kernel is tested on soft-RoCE, in tests/rxe.)

// pollRigCQ is a fake CQ holding n receive completions, as a CQ of this
// package with a completion channel.
func pollRigCQ(t *testing.T, n int) (*fakeprov.Provider, *CQ) {
	t.Helper()
	p, err := fakeprov.New()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	fcq, err := p.NewCQ(256)
	require.NoError(t, err)
	fqp, err := p.NewQP(fakeprov.QPAttr{SendCQ: fcq, RecvCQ: fcq, MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 1, MaxRecvSGE: 1})
	require.NoError(t, err)
	cq := &CQ{raw: (*verbs.CQ)(fcq.Ptr()), rawEx: (*verbs.CQEx)(fcq.ExPtr()), ch: &CompChannel{}}
	cq.size.Store(256)
	cq.init("CQ 0x9")
	c, err := NewRecvChain(n, 1)
	require.NoError(t, err)
	defer c.Close()
	v := c.Reserve(n)
	for i := range n {
		v.Set(i, uint64(i), verbs.SGE{Addr: 0x10000, Length: 64, LKey: 0x1234})
	}
	require.NoError(t, c.PostRecvRaw((*verbs.QP)(fqp.Ptr())))
	require.Equal(t, n, fcq.Pending())
	return p, cq
}

// holdPoll runs poll on a goroutine of its own and returns once the fake
// provider holds it; the returned function releases it and returns what
// it returned.
func holdPoll(t *testing.T, p *fakeprov.Provider, poll func() ([]WC, error)) (release func() ([]WC, error)) {
	t.Helper()
	type result struct {
		wcs []WC
		err error
	}
	p.Hold()
	done := make(chan result, 1)
	go func() {
		wcs, err := poll()
		done <- result{wcs, err}
	}()
	require.Eventually(t, p.Held, 10*time.Second, 100*time.Microsecond, "the call never reached the provider")
	return func() ([]WC, error) {
		p.Release()
		select {
		case r := <-done:
			return r.wcs, r.err
		case <-time.After(10 * time.Second):
			t.Fatal("the held call did not return once released")
			return nil, nil
		}
	}
}

func requirePollUsed(t *testing.T, wcs []WC, err error, method string) {
	t.Helper()
	require.ErrorIs(t, err, ErrConcurrentUse, "%s while another goroutine is in a call", method)
	require.Contains(t, err.Error(), "goverbs: "+method+": another goroutine is in a call of this")
	require.Nil(t, wcs, method)
}

func TestPollerConcurrentUseFails(t *testing.T) {
	const perPoll = 4
	bg := context.Background()
	holders := []struct {
		name string
		call func(p *Poller) ([]WC, error)
	}{
		{"Poll", func(p *Poller) ([]WC, error) { return p.Poll() }},
		{"PollSpin", func(p *Poller) ([]WC, error) { return p.PollSpin(8) }},
		{"Wait", func(p *Poller) ([]WC, error) { return p.Wait(bg) }},
	}
	fp, cq := pollRigCQ(t, perPoll*len(holders))
	p, err := NewPoller(cq, perPoll)
	require.NoError(t, err)
	defer p.Close()
	intruders := []struct {
		name string
		call func() ([]WC, error)
	}{
		{"Poll", p.Poll},
		{"PollSpin", func() ([]WC, error) { return p.PollSpin(8) }},
		{"Wait", func() ([]WC, error) { return p.Wait(bg) }},
		{"WaitThread", func() ([]WC, error) { return p.WaitThread(bg) }},
		{"WaitThreadAtLeast", func() ([]WC, error) { return p.WaitThreadAtLeast(bg, 2) }},
		{"Close", func() ([]WC, error) { return nil, p.Close() }},
	}
	next := uint64(0)
	for _, held := range holders {
		t.Run(held.name, func(t *testing.T) {
			release := holdPoll(t, fp, func() ([]WC, error) { return held.call(p) })
			for _, in := range intruders {
				wcs, err := in.call()
				requirePollUsed(t, wcs, err, "Poller."+in.name)
			}
			wcs, err := release()
			require.NoError(t, err, "the held call")
			require.Len(t, wcs, perPoll, "the held call reaped a full poll: the refused ones took none")
			for i := range wcs {
				require.Equal(t, next, wcs[i].WRID(), "completions in order, none lost")
				next++
			}
		})
	}
	wcs, err := p.Poll()
	require.NoError(t, err)
	require.Empty(t, wcs, "every completion went to a held call")
}

func TestExPollerConcurrentUseFails(t *testing.T) {
	const perPoll = 4
	holders := []struct {
		name string
		call func(p *ExPoller) ([]WC, error)
	}{
		{"Poll", func(p *ExPoller) ([]WC, error) { return p.Poll() }},
		{"PollSpin", func(p *ExPoller) ([]WC, error) { return p.PollSpin(8) }},
	}
	fp, cq := pollRigCQ(t, perPoll*len(holders))
	p, err := NewExPoller(cq, perPoll)
	require.NoError(t, err)
	defer p.Close()
	intruders := []struct {
		name string
		call func() ([]WC, error)
	}{
		{"Poll", p.Poll},
		{"PollSpin", func() ([]WC, error) { return p.PollSpin(8) }},
		{"Close", func() ([]WC, error) { return nil, p.Close() }},
	}
	next := uint64(0)
	for _, held := range holders {
		t.Run(held.name, func(t *testing.T) {
			release := holdPoll(t, fp, func() ([]WC, error) { return held.call(p) })
			for _, in := range intruders {
				wcs, err := in.call()
				requirePollUsed(t, wcs, err, "ExPoller."+in.name)
			}
			wcs, err := release()
			require.NoError(t, err, "the held call")
			require.Len(t, wcs, perPoll)
			for i := range wcs {
				require.Equal(t, next, wcs[i].WRID(), "completions in order, none lost")
				next++
			}
		})
	}
}

// The in-use word is the poller's own: another poller of the same CQ polls
// while one is held, as the package documentation allows (several pollers
// may poll one CQ, each with its own buffer).
func TestPollersOnOneCQDoNotConflict(t *testing.T) {
	fp, cq := pollRigCQ(t, 4)
	a, err := NewPoller(cq, 2)
	require.NoError(t, err)
	defer a.Close()
	b, err := NewPoller(cq, 2)
	require.NoError(t, err)
	defer b.Close()
	release := holdPoll(t, fp, a.Poll)
	wcs, err := b.Poll()
	require.NoError(t, err, "another poller's poll while one is held")
	require.Len(t, wcs, 2)
	got := []uint64{wcs[0].WRID(), wcs[1].WRID()}
	wcs, err = release()
	require.NoError(t, err)
	require.Len(t, wcs, 2)
	got = append(got, wcs[0].WRID(), wcs[1].WRID())
	require.ElementsMatch(t, []uint64{0, 1, 2, 3}, got, "each completion reaped by one poller")
}

// A refused poll allocates nothing.
func TestPollRefusalAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("built with -race, whose runtime allocates for its own bookkeeping: counted without it")
	}
	fp, cq := pollRigCQ(t, 2)
	p, err := NewPoller(cq, 2)
	require.NoError(t, err)
	defer p.Close()
	release := holdPoll(t, fp, p.Poll)
	var refused error
	require.Zero(t, testing.AllocsPerRun(100, func() { _, refused = p.Poll() }), "a refused poll allocates")
	require.True(t, errors.Is(refused, ErrConcurrentUse), "%v", refused)
	_, err = release()
	require.NoError(t, err)
}
