package hand

/*
// noescape alone, as the data path's stubs (data_post.go): every argument
// is an integer or an address in C memory, and nocallback's bookkeeping is
// about 40 instructions a wake (make perf-insns).
#cgo noescape goverbs_wait_fds
#cgo noescape goverbs_wait_cq_event
#cgo noescape goverbs_wait_poll_cq
#include "wait.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// pollFD parks a goroutine on Go's netpoller until an event file descriptor
// owned by a C library (a completion channel, a device's async fd, an
// rdma_cm event channel) is readable, without holding an OS thread.
//
// The library keeps its fd and closes it itself; pollFD sets it
// non-blocking (so the library's read returns EAGAIN instead of blocking)
// and registers a close-on-exec duplicate with the netpoller through
// os.NewFile. Both share one open file description, so readiness of one is
// readiness of the other. The read itself is the library's (ibv_get_cq_event
// and friends), called from a syscall.RawConn.Read callback.
//
// A file has one read deadline, which is how a context cancels the wait,
// so waiters take turns.
//
// A waiter may instead block its OS thread on the library's fd
// (waitThreadHeld), which costs fewer syscalls and no trip through the
// scheduler per wake. A blocked thread cannot see a deadline, so whatever
// would move the deadline (a ctx's end, kick, interrupt) wakes it another
// way. A completion channel's fd comes with a cqKick: the thread then
// blocks in the fd's read itself, as perftest's -e does, and the kick
// raises an event of its own to end the read. Other fds, and a channel
// whose kick does not open, block in epoll_wait on an epoll instance
// (waiter) that watches the fd and an eventfd, wake, which the same
// callers make readable.
type pollFD struct {
	name string
	fd   int32 // the library's
	turn turn  // one waiter at a time

	mu sync.Mutex // guards f, rc, closing, gen, wake, waiter, woken, the kick and every deadline change
	// The duplicate on the netpoller, made with the pollFD and whenever
	// waitHeld finds it gone; a thread waiter (waitThreadHeld) closes it,
	// so that it does not wake the netpoller at every event of an fd that
	// only thread waiters use, and with it, on one P, a thread parked in
	// the netpoller after its P was taken from a blocked thread waiter.
	f       *os.File
	rc      syscall.RawConn
	closing bool
	gen     uint64 // which wait the current deadline (or wake) belongs to
	wake    int32  // the eventfd, made by the first waitThreadHeld; -1 before
	waiter  int32  // the epoll instance watching fd and wake, made with wake
	woken   bool   // wake or the kick was signalled, and not yet drained (the kick's event not yet read)
	// The kick of a completion channel's fd (nil for other fds), opened
	// by the first thread wait (kicking) unless that fails, when thread
	// waits use wake and waiter instead; kickErr says why.
	// While kicking, thread waits block in the fd's read: the fd is
	// blocking from the first of them (blocking) until the netpoller is
	// given it again.
	kicker   threadKicker
	kicking  bool
	kickErr  error
	blocking bool
	// readyKickCQ is the kick's CQ while a thread wait would find nothing
	// to set up (kicking, the fd blocking and off the netpoller, not
	// closing), and 0 otherwise: kept under mu by each thread wait's setup
	// (threadWakeLocked, which clears it first, so that a setup that fails
	// or no longer kicks leaves 0), and cleared by whatever else undoes one
	// of them (netpollLocked, interrupt, closeKick). A thread wait whose
	// ctx cannot end reads it, holding the turn, to skip the setup and p.mu
	// (waitThreadHeld).
	readyKickCQ atomic.Uintptr
}

// A threadWake is how a thread waiter's step blocks: in epoll_wait on
// waiter, or, when waiter is -1, in the fd's read, which an event of
// kickCQ (the kick's CQ) ends.
type threadWake struct {
	waiter int32
	kickCQ uintptr
}

var longAgo = time.Unix(1, 0)

func newPollFD(fd int32, name string) (*pollFD, error) {
	return newPollFDKick(fd, name, nil)
}

// newPollFDKick is newPollFD for a completion channel's fd, whose thread
// waits block in its read and are ended by kick (nil: in epoll_wait).
func newPollFDKick(fd int32, name string, kick threadKicker) (*pollFD, error) {
	if err := syscall.SetNonblock(int(fd), true); err != nil {
		return nil, fmt.Errorf("goverbs: fcntl(%s, O_NONBLOCK): %w", name, err)
	}
	p := &pollFD{name: name, fd: fd, wake: -1, waiter: -1, kicker: kick}
	if err := p.netpollLocked(); err != nil {
		return nil, err
	}
	return p, nil
}

// netpollLocked registers the duplicate with the netpoller unless it is;
// p.mu is held (or p is new).
func (p *pollFD) netpollLocked() error {
	if p.f != nil {
		return nil
	}
	p.readyKickCQ.Store(0)
	if p.blocking {
		// Before os.NewFile, which gives the netpoller only a
		// non-blocking fd.
		if err := syscall.SetNonblock(int(p.fd), true); err != nil {
			return fmt.Errorf("goverbs: fcntl(%s, O_NONBLOCK): %w", p.name, err)
		}
		p.blocking = false
	}
	dup, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(p.fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return fmt.Errorf("goverbs: %s: F_DUPFD_CLOEXEC: %w", p.name, siteFcntl.Err(e))
	}
	f := os.NewFile(dup, p.name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	p.f, p.rc = f, rc
	return nil
}

// setDeadlineLocked moves the netpoller waiter's read deadline, if there
// is a netpoller waiter's file; p.mu is held.
func (p *pollFD) setDeadlineLocked(t time.Time) {
	if p.f != nil {
		p.f.SetReadDeadline(t)
	}
}

// wait calls try until it reports done, parking on the netpoller whenever
// try reports that the fd had nothing (EAGAIN). It returns ctx.Err() when
// ctx ends first and ErrClosed when interrupt closes the fd.
func (p *pollFD) wait(ctx context.Context, try func() (done bool)) error {
	if err := p.acquire(ctx); err != nil {
		return err
	}
	defer p.release()
	return p.waitHeld(ctx, func(uintptr) bool { return try() })
}

// acquire makes the caller the fd's one waiter, until release.
func (p *pollFD) acquire(ctx context.Context) error { return p.turn.acquire(ctx) }

// acquireOr is acquire that gives up with errStopped when stop is ready
// first (turn.acquireOr).
func (p *pollFD) acquireOr(ctx context.Context, stop <-chan struct{}) error {
	return p.turn.acquireOr(ctx, stop)
}

// tryAcquire is acquire when no one holds the fd, and false when someone
// does.
func (p *pollFD) tryAcquire() bool { return p.turn.tryAcquire() }

func (p *pollFD) release() { p.turn.release() }

// waitHeld is wait for a caller that holds the fd (acquire), with try in
// the form syscall.RawConn.Read calls. It allocates nothing when ctx cannot
// end (ctx.Done() is nil, as for context.Background) and try was made
// once, not per call: then a data-path waiter parks and wakes for free.
// A ctx that can end costs the hook that cancels the wait
// (context.AfterFunc), one allocation a call.
func (p *pollFD) waitHeld(ctx context.Context, try func(fd uintptr) (done bool)) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return ErrClosed
	}
	if err := p.netpollLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	p.gen++
	gen := p.gen
	p.f.SetReadDeadline(time.Time{})
	rc := p.rc
	p.mu.Unlock()

	if ctx.Done() != nil {
		defer p.wakeOnDone(ctx, gen, false)()
	}

	for {
		err := rc.Read(try)
		if err == nil {
			return nil
		}
		if err := p.ended(ctx); err != nil {
			return err
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		// A kick, or an interrupt that was undone: try again. The deadline
		// is cleared under p.mu only once neither an interrupt nor ctx's
		// end has come since ended looked, for either sets it under p.mu
		// and would be lost, leaving the wait parked until the fd's next
		// event and Close waiting for it.
		if err := p.rearmDeadline(ctx); err != nil {
			return err
		}
	}
}

// rearmDeadline clears the netpoller waiter's read deadline after a kick,
// unless the wait must end (ended's error).
func (p *pollFD) rearmDeadline(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.f.SetReadDeadline(time.Time{})
	return nil
}

// A threadStep is what a thread waiter (waitThreadHeld) does between
// wakes: it blocks the thread in C as w says (in epoll_wait on w.waiter,
// goverbs_wait_fds, which watches the fd and wake; or in the fd's read)
// until it has what it waits for (done), or until it is woken (not done,
// no error): wake is readable, which it leaves as it found it, or it read
// the kick's event. An error ends the wait.
type threadStep func(w threadWake) (done bool, err error)

// waitThreadHeld is waitHeld with the wait done on the calling goroutine's
// OS thread, blocked inside step in the fd's read (kicking) or in
// epoll_wait on the fd and on wake, rather than parked on the netpoller: a
// wake costs step's read (and epoll_wait), where the netpoller's costs
// five syscalls and the scheduler's run of the goroutine. It holds the
// thread (and, while it waits, its P: see CompChannel.WaitThread) until it
// returns. After a kick it calls step again. It allocates nothing when ctx
// cannot end and step was made once, and, as waitHeld, one hook a call
// when ctx can end. When ctx cannot end and an earlier thread wait left
// the kick set up (readyKickCQ), it steps at once, without p.mu: what the
// rest would do is about 75 instructions a wake (make perf-insns).
func (p *pollFD) waitThreadHeld(ctx context.Context, step threadStep) error {
	if ctx.Done() == nil {
		// The data path's wait: nothing can end it but an interrupt or
		// a kick, and while readyKickCQ is set, either one signals the
		// kick, whose event ends the read below. So the wait steps at
		// once, without p.mu or the wait's generation (which only a
		// ctx's hook reads: a late hook of an earlier wait can wake
		// this one, which then steps again, as after any kick).
		if kickCQ := p.readyKickCQ.Load(); kickCQ != 0 {
			done, err := step(threadWake{waiter: -1, kickCQ: kickCQ})
			if done || err != nil {
				return err
			}
			// Woken: the long way below looks for an interrupt, and
			// steps again if there was none.
			p.kickRead()
		}
	}
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return ErrClosed
	}
	// Off the netpoller while thread waiters use the fd: the caller holds
	// the fd (acquire), so no netpoller waiter is using the file.
	f := p.f
	p.f, p.rc = nil, nil
	w, err := p.threadWakeLocked()
	if err != nil {
		p.mu.Unlock()
		if f != nil {
			f.Close()
		}
		return err
	}
	if !p.kicking {
		p.drainLocked() // a kick or cancel meant for a wait before this one
	}
	// While kicking, such a kick's event may still come: it wakes this
	// wait once, which then steps again.
	p.gen++
	gen := p.gen
	p.mu.Unlock()
	if f != nil {
		f.Close()
	}

	if ctx.Done() != nil {
		defer p.wakeOnDone(ctx, gen, true)()
	}

	for {
		done, err := step(w)
		if done || err != nil {
			return err
		}
		p.mu.Lock()
		p.drainLocked()
		w, err = p.threadWakeLocked() // the kick's failed rearm falls back to epoll_wait
		p.mu.Unlock()
		if err != nil {
			return err
		}
		if err := p.ended(ctx); err != nil {
			return err
		}
		// A kick, or an interrupt that was undone: step again.
	}
}

// threadWakeLocked returns how thread waiters block, made by
// prepareLocked, and makes the fd blocking while kicking. It sets
// readyKickCQ to the kick's CQ when it returns a kicked wake and the fd is
// not closing, and to 0 otherwise. p.mu is held and the netpoller does not
// have the fd (waitThreadHeld).
func (p *pollFD) threadWakeLocked() (threadWake, error) {
	// 0 until this setup has succeeded.
	p.readyKickCQ.Store(0)
	if !p.kicking { // once kicking, there is nothing left to prepare
		if err := p.prepareLocked(); err != nil {
			return threadWake{}, err
		}
	}
	if p.kicking {
		if !p.blocking {
			if err := syscall.SetNonblock(int(p.fd), false); err != nil {
				return threadWake{}, fmt.Errorf("goverbs: fcntl(%s, ~O_NONBLOCK): %w", p.name, err)
			}
			p.blocking = true
		}
		w := threadWake{waiter: -1, kickCQ: p.kicker.cq()}
		if !p.closing { // an interrupt since the caller looked: ended will see it
			p.readyKickCQ.Store(w.kickCQ)
		}
		return w, nil
	}
	if p.blocking {
		if err := syscall.SetNonblock(int(p.fd), true); err != nil {
			return threadWake{}, fmt.Errorf("goverbs: fcntl(%s, O_NONBLOCK): %w", p.name, err)
		}
		p.blocking = false
	}
	return threadWake{waiter: p.waiter}, nil
}

// prepareLocked makes, once, what wakes thread waiters: the kick when the
// fd has one and it opens, else wake and waiter. p.mu is held.
func (p *pollFD) prepareLocked() error {
	if p.kicker != nil && !p.kicking && p.kickErr == nil && p.waiter < 0 {
		if err := p.kicker.open(); err != nil {
			p.kickErr = err
		} else {
			p.kicking = true
		}
	}
	if p.kicking || p.waiter >= 0 {
		return nil
	}
	return p.openWaiterLocked()
}

// prepareThreadWait is prepareLocked for a caller that does not hold p.mu,
// so that the first thread wait does not pay for it.
func (p *pollFD) prepareThreadWait() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return ErrClosed
	}
	return p.prepareLocked()
}

// ended says why a woken wait must end: ErrClosed once interrupt closed
// the fd, ctx's error once it ended; nil to wait on.
func (p *pollFD) ended(ctx context.Context) error {
	p.mu.Lock()
	closing := p.closing
	p.mu.Unlock()
	if closing {
		return ErrClosed
	}
	return ctx.Err()
}

// openWaiterLocked makes wake and waiter; p.mu is held.
func (p *pollFD) openWaiterLocked() error {
	w := C.goverbs_wake_open()
	if w < 0 {
		return fmt.Errorf("the wake-up of a thread wait: %w", siteEventfd.Err(syscall.Errno(-w)))
	}
	ep := C.goverbs_waiter_open(C.int(p.fd), w)
	if ep < 0 {
		syscall.Close(int(w))
		return fmt.Errorf("a thread wait's epoll set (epoll_create1, epoll_ctl): %w", syscall.Errno(-ep))
	}
	p.wake, p.waiter = int32(w), int32(ep)
	return nil
}

// waitFDs blocks the thread in epoll_wait on w.waiter until the fd or wake
// is readable, and says which: the wait of a threadStep whose read Go
// makes, as the tests' (a test file cannot call C). Their fds have no
// kick.
func waitFDs(w threadWake) (fdReady, wakeReady bool, err error) {
	r := C.goverbs_wait_fds(C.int(w.waiter))
	if r < 0 {
		return false, false, siteEpollWait.Err(syscall.Errno(-r))
	}
	return r&C.GOVERBS_FD_READY != 0, r&C.GOVERBS_WAKE_READY != 0, nil
}

// wakeOnDone wakes wait gen when ctx ends, unless another wait or a close
// came first: through the read deadline, or, for a thread waiter, wake.
// It returns what unhooks it (context.AfterFunc, one allocation).
func (p *pollFD) wakeOnDone(ctx context.Context, gen uint64, thread bool) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		p.mu.Lock()
		if p.gen == gen && !p.closing {
			if thread {
				p.signalLocked()
			} else {
				p.setDeadlineLocked(longAgo)
			}
		}
		p.mu.Unlock()
	})
}

// signalLocked wakes a thread waiter: it signals the kick, while
// kicking and no netpoller waiter can be using the fd, or makes wake
// readable; p.mu is held.
func (p *pollFD) signalLocked() {
	if p.woken {
		return
	}
	switch {
	case p.kicking:
		if p.f != nil {
			return // the deadline wakes the netpoller's waiter
		}
		if err := p.kicker.signal(); err != nil {
			// The QP would not move to the error state: nothing left
			// can end the read but an event of the channel's CQs.
			p.kickErr = err
			return
		}
		p.woken = true
	case p.wake >= 0:
		C.goverbs_wake_signal(C.int(p.wake))
		p.woken = true
	}
}

// drainLocked clears what signalLocked did, once the thread waiter is
// awake: wake is made empty again, or, while kicking (the waiter read the
// kick's event), the kick is made ready for the next signal; a kick that
// will not rearm is closed, and thread waits use epoll_wait from then on.
// p.mu is held.
func (p *pollFD) drainLocked() {
	if !p.woken {
		return
	}
	p.woken = false
	if p.kicking {
		if err := p.kicker.rearm(); err != nil {
			p.kickErr = err
			p.kicker.close()
			p.kicking = false
		}
		return
	}
	C.goverbs_wake_drain(C.int(p.wake))
}

// kickRead is what a waiter does when it has read the kick's event, not
// holding p.mu: a netpoller waiter (a signal meant for a thread waiter
// before it) and a thread waiter on the short way (waitThreadHeld).
// drainLocked clears the signal.
func (p *pollFD) kickRead() {
	p.mu.Lock()
	p.drainLocked()
	p.mu.Unlock()
}

// isKick reports whether cq (an event's) is the kick's CQ.
func (p *pollFD) isKick(cq unsafe.Pointer) bool {
	return p.kicker != nil && cq != nil && uintptr(cq) == p.kicker.cq()
}

// closeKick destroys the kick, which must go before the channel can; a
// later thread wait opens it again. No waiter is left (CompChannel.Close).
func (p *pollFD) closeKick() {
	p.mu.Lock()
	if p.kicking {
		p.kicker.close()
		p.kicking, p.woken = false, false
		p.readyKickCQ.Store(0)
	}
	p.mu.Unlock()
}

// interrupt wakes the waiter (it returns ErrClosed) and refuses new ones.
func (p *pollFD) interrupt() {
	p.mu.Lock()
	p.closing = true
	p.readyKickCQ.Store(0)
	p.setDeadlineLocked(longAgo)
	p.signalLocked()
	p.mu.Unlock()
}

// isClosing reports whether interrupt is in force (and not undone).
func (p *pollFD) isClosing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closing
}

// kick wakes the waiter without closing: it calls try again, which may
// then report that what it waits for is gone.
func (p *pollFD) kick() {
	p.mu.Lock()
	if !p.closing {
		p.setDeadlineLocked(longAgo)
		p.signalLocked()
	}
	p.mu.Unlock()
}

// undo reverts interrupt, when the Close that called it failed.
func (p *pollFD) undo() {
	p.mu.Lock()
	p.closing = false
	p.setDeadlineLocked(time.Time{})
	p.mu.Unlock()
}

// close closes the duplicate, waiter and wake, once no waiter is left; the
// library closes its own fd.
func (p *pollFD) close() {
	p.interrupt()
	p.mu.Lock()
	f := p.f
	p.mu.Unlock()
	if f != nil {
		// Not under p.mu: Close waits for the netpoller waiter's read to
		// return, and the waiter takes p.mu on its way out (ended).
		f.Close()
	}
	p.mu.Lock()
	if p.waiter >= 0 {
		syscall.Close(int(p.waiter))
		syscall.Close(int(p.wake))
		p.waiter, p.wake, p.woken = -1, -1, false
	}
	p.mu.Unlock()
}
