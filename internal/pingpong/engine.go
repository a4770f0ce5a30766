package pingpong

import (
	"errors"
	"fmt"

	"github.com/goverbs/goverbs/hand"
)

// engine is the data path: after newEngine, postRecv, postSend and loop
// do not allocate (until an error is formatted).
type engine struct {
	qp     *hand.QP
	sge    hand.SGE // the whole buffer, for every send and receive
	flags  hand.SendFlags
	rx     int
	iters  int
	recv   *hand.RecvChain
	send   *hand.SendChain
	poller *hand.Poller
	err    error // why the last postRecv stopped short

	pending, routs, scnt, rcnt int
	rbytes                     int64
}

func newEngine(qp *hand.QP, cq *hand.CQ, mr *hand.MR, cfg Config) (*engine, error) {
	e := &engine{qp: qp, sge: mr.SGE(0, cfg.Size), flags: hand.Signaled, rx: cfg.RxDepth, iters: cfg.Iters}
	// As the C tool: inline when the QP can take the whole message.
	if qp.Caps().MaxInlineData >= cfg.Size {
		e.flags |= hand.Inline
	}
	var err error
	if e.recv, err = hand.NewRecvChain(cfg.RxDepth, 1); err != nil {
		return nil, err
	}
	if e.send, err = hand.NewSendChain(1, 1, 0); err != nil {
		e.free()
		return nil, err
	}
	if e.poller, err = hand.NewPoller(cq, 2); err != nil {
		e.free()
		return nil, err
	}
	return e, nil
}

func (e *engine) free() {
	if e.recv != nil {
		e.recv.Close()
	}
	if e.send != nil {
		e.send.Close()
	}
	if e.poller != nil {
		e.poller.Close()
	}
}

// postRecv posts n receives of the whole buffer with one call and returns
// how many went through.
func (e *engine) postRecv(n int) int {
	v := e.recv.Reserve(n)
	for i := range n {
		v.Set(i, recvWRID, e.sge)
	}
	if err := e.recv.PostRecv(e.qp); err != nil {
		e.err = err
		var pe *hand.PostError
		posted := 0
		if errors.As(err, &pe) {
			posted = pe.Posted
		}
		e.recv.Reset()
		return posted
	}
	return n
}

func (e *engine) postSend() error {
	e.send.Reserve(1).SetSend(0, sendWRID, e.flags, e.sge)
	if err := e.send.PostSend(e.qp); err != nil {
		e.send.Reset()
		return err
	}
	return nil
}

// loop busy-polls until iters messages went each way, keeping the receive
// queue full and sending whenever the previous send and a receive are done.
func (e *engine) loop() error {
	for e.rcnt < e.iters || e.scnt < e.iters {
		wcs, err := e.poller.Poll()
		if err != nil {
			return fmt.Errorf("poll CQ failed: %w", err)
		}
		for i := range wcs {
			w := &wcs[i]
			if !w.OK() {
				return fmt.Errorf("failed status %s (%d) for wr_id %d", w.StatusString(), w.Status(), w.WRID())
			}
			switch id := w.WRID(); id {
			case sendWRID:
				e.scnt++
			case recvWRID:
				e.routs--
				if e.routs <= 1 {
					want := e.rx - e.routs
					if n := e.postRecv(want); n < want {
						return fmt.Errorf("couldn't post receive (%d): %w", e.routs+n, e.err)
					}
					e.routs = e.rx
				}
				e.rcnt++
				e.rbytes += int64(w.ByteLen())
			default:
				return fmt.Errorf("completion for unknown wr_id %d", id)
			}
			e.pending &^= int(w.WRID())
			if e.scnt < e.iters && e.pending == 0 {
				if err := e.postSend(); err != nil {
					return fmt.Errorf("couldn't post send: %w", err)
				}
				e.pending = recvWRID | sendWRID
			}
		}
	}
	return nil
}
