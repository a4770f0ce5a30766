package hand

import (
	"context"
	"strconv"
)

// Wait returns the next completions of the poller's CQ as Poll does,
// waiting for one when there are none, as rdma_get_send_comp and
// rdma_get_recv_comp do: it polls; on an empty CQ it arms it
// (RequestNotify) and polls again, since a completion that arrived before
// the arm raises no event; then it parks on the CQ's completion channel,
// holding no OS thread, and starts over when the event comes. It returns
// ctx.Err() when ctx ends first and ErrClosed when the CQ is closed.
//
// The CQ must have a completion channel (CQOptions.Channel; a Conn's own
// CQ has one), and the poller must come from NewPoller: a NewPollerRaw
// poller gets an *AttrError. It allocates nothing, parked or not, when
// ctx cannot end (ctx.Done() is nil: context.Background): the busy-free
// data path's wait. A ctx that can end costs the hook that cancels a parked
// wait (context.AfterFunc), a few allocations a park, never one a
// completion.
//
// A wait holds the poller from its start to its return, parked or not: a
// call of the poller from another goroutine meanwhile returns an error
// matching ErrConcurrentUse, as does a wait that finds the poller in use.
func (p *Poller) Wait(ctx context.Context) ([]WC, error) {
	if !p.use.enter() {
		return nil, usedWait
	}
	wcs, err := p.wait(ctx)
	p.use.exit()
	return wcs, err
}

// wait is Wait once it holds p.use.
func (p *Poller) wait(ctx context.Context) ([]WC, error) {
	if err := p.waitable("Poller.Wait"); err != nil {
		return nil, err
	}
	armed := false
	wcs, err := p.poll(0, 1, nil)
	for {
		if err != nil || len(wcs) > 0 {
			return wcs, err
		}
		if !armed {
			wcs, err = p.armPoll()
			armed = true
			continue
		}
		if err := p.owner.wait(ctx, "Poller.Wait", false); err != nil {
			return nil, err
		}
		armed = false // the event disarmed it
		wcs, err = p.poll(0, 1, nil)
	}
}

// WaitThread is Wait with the waiting done on the calling goroutine's OS
// thread, blocked in the channel's read (CompChannel.WaitThread for what
// that costs and saves, and what ends it), and with the loop in C: one cgo
// call polls, waits, reads and acknowledges the event, arms the CQ again
// and polls again (goverbs_wait_poll_cq), so a wake costs one crossing
// where Wait's loop costs five. It arms as perftest's -e does, right after
// each event and before the poll, and so leaves the CQ armed when it
// returns completions; the next WaitThread that finds the CQ empty waits
// without arming it again. A completion that arrived between that arm and
// the poll is returned with its event still queued, so a CQ.Wait after
// this one may return with nothing left to poll. Events of other CQs on
// the channel are kept for their own waits. Close of the CQ wakes it with
// ErrClosed; ctx, allocations and holding the poller are as for Wait.
func (p *Poller) WaitThread(ctx context.Context) ([]WC, error) {
	if !p.use.enter() {
		return nil, usedWaitThread
	}
	wcs, err := p.waitThread(ctx, 1, "Poller.WaitThread")
	p.use.exit()
	return wcs, err
}

// WaitThreadAtLeast is WaitThread that returns once the poller holds at
// least min completions, or as many as it holds (its n) if min is more:
// its loop in C goes on polling, and waiting for events, until it has
// them, so that a receiver under load crosses into C once for min
// completions rather than once a wake. It returns fewer, at least one,
// when a completion's status is not success (a failed WR, or a QP flushed
// to the error state, whose WRs may never make up min), and when the wait
// ends with some held: ctx ends, the CQ closes, or a poll, arm or read
// fails. It then returns those completions and no error, and the next wait
// reports why it ended, so none is lost. The completions it holds are
// those that came first, in order. So min should not be more than the
// completions that will come while the QP works: a wait for more blocks
// until ctx ends or the CQ closes. With min 1 it is WaitThread; below 1,
// an *AttrError. Events, ctx, allocations and holding the poller are as
// for WaitThread.
func (p *Poller) WaitThreadAtLeast(ctx context.Context, min int) ([]WC, error) {
	if min < 1 {
		return nil, &AttrError{Op: "Poller.WaitThreadAtLeast", Field: "min", Reason: strconv.Itoa(min) + ": must be at least 1"}
	}
	if !p.use.enter() {
		return nil, usedWaitThreadAtLeast
	}
	wcs, err := p.waitThread(ctx, min, "Poller.WaitThreadAtLeast")
	p.use.exit()
	return wcs, err
}

// waitThread is WaitThreadAtLeast once min is checked and p.use held; op
// names the call in its errors.
func (p *Poller) waitThread(ctx context.Context, min int, op string) ([]WC, error) {
	if err := p.waitable(op); err != nil {
		return nil, err
	}
	if p.mem == nil {
		return nil, ErrClosed
	}
	if p.owner.Overrun() {
		// The C loop would block on an empty CQ that overran, whose
		// dropped completions raise no event: poll instead, which returns
		// what is left, then the overrun.
		return p.poll(0, 1, nil)
	}
	n, err := p.owner.ch.waitPoll(ctx, p, min)
	if err != nil {
		return nil, err
	}
	return p.wc[:n], nil
}

// waitable refuses a wait (op) on a poller without a CQ that has a
// completion channel: a NewPollerRaw poller, or a CQ made without one.
func (p *Poller) waitable(op string) error {
	if p.owner == nil || p.owner.ch == nil {
		return &AttrError{Op: op, Field: "cq", Reason: "needs a CQ with a completion channel, and a poller from NewPoller"}
	}
	return nil
}
