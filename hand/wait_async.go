package hand

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// AsyncEvent is an asynchronous event of a device (struct ibv_async_event),
// copied out and already acknowledged: nothing about it needs releasing.
type AsyncEvent struct {
	Type EventType
	// The object the event is about, by event type: QP for the QP events,
	// CQ for EventCQErr (the CQ overran: its Overrun is true from then
	// on), SRQ for the SRQ events, Port for the port events (nil or 0
	// otherwise). QP, CQ and SRQ are nil for an object this
	// package did not make.
	QP   *QP
	CQ   *CQ
	SRQ  *SRQ
	Port int
}

func (e AsyncEvent) String() string {
	s := goString(verbs.EventTypeStr(e.Type))
	switch {
	case e.QP != nil:
		s += fmt.Sprintf(" on QP %d", e.QP.Num())
	case e.CQ != nil:
		s += " on " + e.CQ.label
	case e.SRQ != nil:
		s += " on an SRQ"
	case e.Port != 0:
		s += fmt.Sprintf(" on port %d", e.Port)
	}
	return s
}

// NextEvent waits for the device's next async event (ibv_get_async_event),
// parked on the netpoller, acknowledges it (ibv_ack_async_event) and
// returns a copy. Acknowledging at once matters: destroying a QP, CQ or SRQ
// blocks until each of its events is acknowledged. NextEvent returns
// ctx.Err() when ctx ends first and ErrClosed when the Context is closed.
func (c *Context) NextEvent(ctx context.Context) (AsyncEvent, error) {
	if err := c.use(); err != nil {
		return AsyncEvent{}, err
	}
	for {
		ev, err := c.nextEvent(ctx)
		// ErrClosed with Close's interrupt in force: a Close of the
		// Context woke the wait, and may yet fail (outlast).
		if err != ErrClosed || !c.eventsClosing() {
			c.done()
			return ev, err
		}
		if err := c.outlast(c.eventsClosing); err != nil {
			return AsyncEvent{}, err
		}
	}
}

// eventsClosing reports whether Close's interrupt of the async events is
// in force.
func (c *Context) eventsClosing() bool {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	return c.evClosing
}

// nextEvent is NextEvent for a caller that holds c (use).
func (c *Context) nextEvent(ctx context.Context) (AsyncEvent, error) {
	fd, err := c.eventFD()
	if err != nil {
		return AsyncEvent{}, err
	}
	var ev AsyncEvent
	var failed error
	err = fd.wait(ctx, func() bool {
		var raw verbs.AsyncEvent
		switch err := verbs.GetAsyncEvent(c.raw, &raw); {
		case err == nil:
		case errors.Is(err, syscall.EAGAIN): // the async fd is non-blocking: nothing pending
			return false
		default:
			failed = err
			return true
		}
		ev = c.convertEvent(&raw)
		verbs.ACKAsyncEvent(&raw)
		return true
	})
	if err == nil {
		err = failed
	}
	return ev, err
}

// Events delivers the device's async events on a channel until ctx ends or
// the Context is closed, then closes the channel. The events are
// acknowledged before they are sent. Use it, or NextEvent, not both.
func (c *Context) Events(ctx context.Context) <-chan AsyncEvent {
	out := make(chan AsyncEvent, 16)
	go func() {
		defer close(out)
		for {
			ev, err := c.NextEvent(ctx)
			if err != nil {
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (c *Context) convertEvent(raw *verbs.AsyncEvent) AsyncEvent {
	ev := AsyncEvent{Type: raw.EventType}
	switch raw.EventType {
	case verbs.EventCQErr:
		ev.CQ, _ = c.lookup(unsafe.Pointer(raw.Element.CQ)).(*CQ)
		if ev.CQ != nil {
			// A device reports a CQ's overrun, the one CQ error there
			// is, this way: the CQ's polls say so from now on.
			ev.CQ.markOverrun()
		}
	case verbs.EventQPFatal, verbs.EventQPReqErr, verbs.EventQPAccessErr, verbs.EventCommEst,
		verbs.EventSQDrained, verbs.EventPathMig, verbs.EventPathMigErr, verbs.EventQPLastWQEReached:
		ev.QP, _ = c.lookup(unsafe.Pointer(*raw.Element.QP())).(*QP)
	case verbs.EventSRQErr, verbs.EventSRQLimitReached:
		ev.SRQ, _ = c.lookup(unsafe.Pointer(*raw.Element.SRQ())).(*SRQ)
	case verbs.EventPortActive, verbs.EventPortErr, verbs.EventLIDChange, verbs.EventPKeyChange,
		verbs.EventSMChange, verbs.EventClientReregister, verbs.EventGIDChange:
		ev.Port = int(*raw.Element.PortNum())
	}
	return ev
}

// eventFD makes the async fd's poller on first use. The caller holds c.
// Once Close has begun it returns ErrClosed: a poller made after Close's
// interrupt would park a NextEvent that Close then waits for, until the
// device's next event.
func (c *Context) eventFD() (*pollFD, error) {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	if c.evClosing {
		return nil, ErrClosed
	}
	if c.ev == nil {
		fd, err := newPollFD(c.raw.AsyncFD, "ibv_context async_fd")
		if err != nil {
			return nil, err
		}
		c.ev = fd
	}
	return c.ev, nil
}

func (c *Context) interruptEvents() {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	c.evClosing = true
	if c.ev != nil {
		c.ev.interrupt()
	}
}

func (c *Context) undoInterruptEvents() {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	c.evClosing = false
	if c.ev != nil {
		c.ev.undo()
	}
}
