package perf

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// peerTimeout is how long a timed loop may go without a completion before
// the peer is given up, as perftest gives up on a send_bw client: its
// check_alive looks every 60 s (alarm(60)) and exits when no message came
// since its last look ("Did not get Message for 120 Seconds, exiting..",
// perftest_resources.c), 60 to 120 s after the last. A variable for the
// tests.
var peerTimeout = 60 * time.Second

// peerWatch ends a timed loop whose peer is gone. The loops wait for
// completions that only the peer's part brings (a send_bw server's
// receives, send_lat's answers, a client's acknowledgements), and a busy
// poll, or a wait on context.Background, waits for ever for a peer that
// died. The watch costs the loops nothing: its goroutine reads the side
// channel, where the peer sends nothing until its end sync, and so learns
// at once that the peer's process ended (EOF, or a reset); and it compares
// the loop's completions (progress) every peerTimeout, as perftest's
// check_alive does. Either way it moves the QP to ERR (abort), which
// flushes the outstanding WRs: the loop, busy-polling in Go or in C or
// waiting for an event, meets a flushed completion and fails, and stop
// says why. The byte of the peer's end sync, which may come while the loop
// still runs, is the watch's to read: endSync takes it from there.
type peerWatch struct {
	conn     net.Conn
	progress func() int64 // the loop's completions so far
	abort    func() error // ends the loop: qp.ToError
	timeout  time.Duration
	begin    chan struct{} // the start sync is done: read what follows
	state    atomic.Int32
	aborted  chan error // why the watch aborted the loop, once it has
	got      chan error // the peer's end sync byte (nil), or the side channel's failure
	buf      [1]byte
}

// The watch's states: idle until begin, watching while the loop runs,
// stopped once it ended (or was never reached), aborted once the watch
// ended it.
const (
	watchIdle int32 = iota
	watching
	watchStopped
	watchAborted
)

// newPeerWatch starts the watch's goroutine, which waits for begin. It is
// made before the timed part, whose allocations are counted; what the
// goroutine allocates later (a timeout's error) is left out of the count
// (allocs.go): it is not the loop's.
func newPeerWatch(conn net.Conn, progress func() int64, abort func() error) *peerWatch {
	w := &peerWatch{conn: conn, progress: progress, abort: abort, timeout: peerTimeout,
		begin: make(chan struct{}, 1), aborted: make(chan error, 1), got: make(chan error, 1)}
	go w.run()
	return w
}

func (w *peerWatch) run() {
	<-w.begin
	last := w.progress()
	synced := false // the peer's end sync byte came
	for {
		var deadline time.Time
		if w.state.Load() == watching {
			deadline = time.Now().Add(w.timeout)
		}
		w.conn.SetReadDeadline(deadline) // fails only on a closed conn, which the read then reports
		_, err := w.conn.Read(w.buf[:])
		switch {
		case err == nil:
			if !synced {
				synced = true
				w.got <- nil
			}
			// A write_bw or read_bw server, which runs no loop, sends
			// it as the loop starts: the watch goes on while it runs.
			if w.state.Load() != watching {
				return
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
			if p := w.progress(); p != last {
				last = p
				continue
			}
			w.end(fmt.Errorf("nothing completed in %v, %d completions in: the peer stopped sending or answering (perftest's check_alive gives up likewise)", w.timeout, last))
		default:
			if synced {
				w.end(sideErr(err, "our end sync"))
				return
			}
			w.end(sideErr(err, "the end sync"))
			w.got <- err
			return
		}
	}
}

// end aborts the loop for cause, if it still runs.
func (w *peerWatch) end(cause error) {
	if !w.state.CompareAndSwap(watching, watchAborted) {
		return
	}
	if err := w.abort(); err != nil {
		cause = fmt.Errorf("%w; ending the loop: %w", cause, err)
	}
	w.aborted <- cause
}

// start is the loop's start: from here a dead peer ends it. A nil watch
// (a side that runs no loop) does nothing.
func (w *peerWatch) start() {
	if w != nil && w.state.CompareAndSwap(watchIdle, watching) {
		w.begin <- struct{}{}
	}
}

// stop is the loop's end, loopErr what it returned: the error of a loop
// the watch aborted says why.
func (w *peerWatch) stop(loopErr error) error {
	if w == nil || w.state.CompareAndSwap(watching, watchStopped) || w.state.Load() != watchAborted {
		return loopErr
	}
	if cause := <-w.aborted; loopErr != nil {
		return fmt.Errorf("%w; the watch ended the timed loop: %w", cause, loopErr)
	}
	return nil // it finished first; the flush came after
}

// release ends a watch that Run leaves early; the conn's Close, after it,
// ends the goroutine's read.
func (w *peerWatch) release() {
	if w == nil {
		return
	}
	w.state.CompareAndSwap(watching, watchStopped)
	if w.state.CompareAndSwap(watchIdle, watchStopped) {
		w.begin <- struct{}{}
	}
}

// endSync is sync's end sync for a side whose watch reads the peer's byte.
func (w *peerWatch) endSync(c net.Conn, buf []byte) error {
	if w == nil {
		return sync(c, buf, "the end sync")
	}
	if _, err := c.Write(syncByte); err != nil {
		return sideErr(err, "the end sync")
	}
	if err := <-w.got; err != nil {
		return sideErr(err, "the end sync")
	}
	return nil
}
