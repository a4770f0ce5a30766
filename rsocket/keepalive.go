package rsocket

import (
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/hand"
)

// defaultKeepAlive is the idle time after which a connection probes its
// peer when Config.KeepAlive is 0: net.Dialer's and net.ListenConfig's
// default, not rsocket's (keepalive off unless SO_KEEPALIVE, then TCP's
// 2 hours), so that a Read blocked on a peer that vanished ends within
// about 32 s (see Config.KeepAlive).
const defaultKeepAlive = 15 * time.Second

// keepAlive is a connection's prober: one timer, no goroutine of its own
// while it waits. Guarded by Conn.mu.
type keepAlive struct {
	period  time.Duration // 0: off
	wait    time.Duration // how long a probe may go unanswered
	timer   *time.Timer
	last    time.Time // the last completion reaped, or the start
	probing bool      // a probe (or a control message) waits since probeAt, unanswered
	probeAt time.Time
}

// keepAlivePeriod is cfg's KeepAlive as a period, 0 for none.
func (cfg Config) keepAlivePeriod() time.Duration {
	switch {
	case cfg.KeepAlive < 0:
		return 0
	case cfg.KeepAlive == 0:
		return defaultKeepAlive
	}
	return cfg.KeepAlive
}

// startKeepAlive arms the prober; mu is held, so the timer's first tick
// finds it set.
func (c *Conn) startKeepAlive() {
	if c.ka.period == 0 {
		return
	}
	c.ka.wait = c.ka.period + c.ackTimeout()
	c.ka.last = time.Now()
	c.ka.timer = time.AfterFunc(c.ka.period, c.keepAliveTick)
}

// keepAliveSeen notes that completions came (the loop, with mu held): the
// peer's transport answered, or a send that is still to complete will
// fail if it does not.
func (c *Conn) keepAliveSeen() {
	if c.ka.period != 0 {
		c.ka.last = time.Now()
		c.ka.probing = false
	}
}

// ackTimeout is the QP's local ACK timeout, which rdma_cm set from the
// path (0: none, or unknown): after it, the transport sends an
// unacknowledged request again.
func (c *Conn) ackTimeout() time.Duration {
	attr, _, err := c.hc.QP().Query()
	if err != nil || attr.Timeout == 0 || attr.Timeout > 31 {
		return 0
	}
	return time.Duration(4096) << attr.Timeout // 4.096 us * 2^timeout
}

// stopKeepAlive stops the prober (Close, with mu held); a tick already
// waiting for mu finds the connection closed and posts nothing.
func (c *Conn) stopKeepAlive() {
	if c.ka.timer != nil {
		c.ka.timer.Stop()
	}
}

// keepAliveTick runs on the timer. After a period without completions it
// posts a probe, rsocket's keepalive: a 0-byte RDMA write without
// immediate data, which the peer's transport acknowledges and its rsocket
// never sees. A probe still unanswered (no completion at all) after the
// period plus the QP's local ACK timeout fails the connection: the peer
// stopped answering. The ACK timeout gives the transport time to send a
// lost probe again, and a loaded host time to reap a late completion,
// however short the period.
//
// The RC transport may fail the probe first, after RetryCount retries
// each a local ACK timeout apart, with IBV_WC_RETRY_EXC_ERR (sendFailed);
// but rsocket's RetryCount of 7 means retry forever to soft-RoCE (rxe
// never counts a retry count of 7 down), so the deadline is this side's.
func (c *Conn) keepAliveTick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.err != nil || c.peerClosed {
		return // for good: nothing is left to probe for
	}
	now := time.Now()
	if idle := now.Sub(c.ka.last); idle < c.ka.period {
		c.ka.timer.Reset(c.ka.period - idle)
		return
	}
	if c.ka.probing {
		waited := now.Sub(c.ka.probeAt)
		if waited < c.ka.wait {
			// No later than a period on: an answer meanwhile
			// restarts the idle count, which a tick must follow.
			c.ka.timer.Reset(min(c.ka.period, c.ka.wait-waited))
			return
		}
		c.failLocked(c.opErr("read", fmt.Errorf("%w: the peer stopped answering: no acknowledgement of a keepalive probe in %v, after %v without a completion",
			syscall.ETIMEDOUT, waited.Round(time.Millisecond), c.ka.probeAt.Sub(c.ka.last).Round(time.Millisecond))))
		c.wake()
		return
	}
	// With every control slot in flight, those messages probe: the first
	// of their completions answers as the probe's would.
	if c.ctrlAvail() {
		if err := c.postKeepAlive(); err != nil {
			c.failLocked(c.opErr("keepalive", err))
			c.wake()
			return
		}
	}
	c.ka.probing, c.ka.probeAt = true, now
	c.ka.timer.Reset(c.ka.period)
}

// postKeepAlive posts the probe; the caller checked ctrlAvail. The write
// goes to the start of the peer's target list under its key, which every
// rsocket registers for remote writes: rsocket itself writes to address 0
// with key 0, which a 0-byte write need not check (IBA C9-88), but a valid
// pair holds on a responder that checks anyway.
func (c *Conn) postKeepAlive() error {
	id := c.takeCtrl(sendProbe)
	v := c.sc.Reserve(1)
	v.SetWrite(0, id, hand.Signaled, hand.SGE{}, c.remoteSGL.Addr, c.remoteSGL.Key)
	v.WR(0).NumSGE = 0
	if err := c.sc.PostSend(c.hc.QP()); err != nil {
		c.sc.Reset()
		return err
	}
	return nil
}

// sendFailed is the error of a send completion that failed with a status
// other than a flush. A send the transport retried to the end means the
// peer stopped answering: ETIMEDOUT, as a TCP connection whose
// retransmissions or keepalive probes went unanswered; anything else is a
// reset.
func (c *Conn) sendFailed(wc *hand.WC, kind sendKind) error {
	if wc.Status() != hand.StatusRetryExcErr {
		return &net.OpError{Op: "write", Net: "tcp", Source: c.laddr, Addr: c.raddr,
			Err: fmt.Errorf("%w (send completion: %s)", syscall.ECONNRESET, wc.StatusString())}
	}
	op, what := "write", "a write"
	if kind == sendProbe {
		op, what = "read", "a keepalive probe"
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.laddr, Addr: c.raddr,
		Err: fmt.Errorf("%w: the peer stopped answering: %s went unacknowledged through the transport's retries (send completion: %s)",
			syscall.ETIMEDOUT, what, wc.StatusString())}
}
