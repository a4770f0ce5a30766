package hand

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// Once an IBV_EVENT_CQ_ERR of a CQ has been read, its polls return the
// completions left and then, on every empty poll, the CQ's *OverrunError
// (one value, so allocation-free), matching ErrCQOverrun; before the event,
// an empty poll is no error. On the fake provider, where the event is
// marked as NextEvent's conversion marks it.
func TestCQOverrunAfterEvent(t *testing.T) {
	p, err := fakeprov.New()
	require.NoError(t, err)
	defer p.Close()
	fcq, err := p.NewCQ(16)
	require.NoError(t, err)
	fqp, err := p.NewQP(fakeprov.QPAttr{SendCQ: fcq, RecvCQ: fcq, MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	require.NoError(t, err)
	cq := &CQ{raw: (*verbs.CQ)(fcq.Ptr()), rawEx: (*verbs.CQEx)(fcq.ExPtr()), ch: &CompChannel{}}
	cq.size.Store(16)
	cq.init("CQ 0x9")
	poller, err := NewPoller(cq, 2)
	require.NoError(t, err)
	defer poller.Close()
	ex, err := NewExPoller(cq, 2)
	require.NoError(t, err)
	defer ex.Close()
	wc := make([]verbs.WC, 2)

	wcs, err := poller.Poll()
	require.NoError(t, err, "an empty poll before any overrun")
	require.Empty(t, wcs)
	n, err := cq.Poll(wc)
	require.NoError(t, err)
	require.Zero(t, n)
	require.False(t, cq.Overrun())

	c, err := NewRecvChain(4, 1)
	require.NoError(t, err)
	defer c.Close()
	v := c.Reserve(4)
	for i := range 4 {
		v.Set(i, uint64(i), verbs.SGE{Addr: 0x10000, Length: 64, LKey: 0x1234})
	}
	require.NoError(t, c.PostRecvRaw((*verbs.QP)(fqp.Ptr())))

	cq.markOverrun()
	first := cq.overrun.Load()
	cq.markOverrun() // each dropped completion raises one: the first is kept
	require.Same(t, first, cq.overrun.Load())
	require.True(t, cq.Overrun())

	wcs, err = poller.Poll()
	require.NoError(t, err, "completions left are returned first")
	require.Len(t, wcs, 2)
	n, err = cq.Poll(wc[:1])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	xs, err := ex.Poll()
	require.NoError(t, err)
	require.Len(t, xs, 1)

	polls := map[string]func() error{
		"Poller.Poll":     func() error { _, err := poller.Poll(); return err },
		"Poller.PollSpin": func() error { _, err := poller.PollSpin(4); return err },
		"ExPoller.Poll":   func() error { _, err := ex.Poll(); return err },
		"CQ.Poll":         func() error { _, err := cq.Poll(wc); return err },
		"Poller.Wait":     func() error { _, err := poller.Wait(context.Background()); return err },
		"Poller.WaitThread": func() error {
			_, err := poller.WaitThread(context.Background())
			return err
		},
	}
	for name, poll := range polls {
		err := poll()
		require.ErrorIs(t, err, ErrCQOverrun, name)
		require.Same(t, error(first), err, name)
		var oe *OverrunError
		require.True(t, errors.As(err, &oe), name)
		require.Equal(t, OverrunError{CQ: "CQ 0x9", Size: 16}, *oe)
	}
	require.EqualError(t, first, "goverbs: CQ 0x9 (16 entries) overran: the device dropped completions it had no room for "+
		"(IBV_EVENT_CQ_ERR); close its QPs and make a CQ that holds every completion they can have outstanding")
	if a := testing.AllocsPerRun(100, func() { poller.Poll() }); a != 0 {
		t.Errorf("an overrun CQ's empty Poller.Poll allocates %v times", a)
	}
	require.Equal(t, "CQ error on CQ 0x9", AsyncEvent{Type: verbs.EventCQErr, CQ: cq}.String())
}
