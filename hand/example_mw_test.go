package hand_test

import (
	"context"
	"fmt"
	"log"

	"github.com/goverbs/goverbs/hand"
)

// A per-operation grant with a type 2 memory window, both sides, compiled
// but not run (they need a device; tests/rxe's TestStaleKeyMWType2 makes
// the same calls on soft-RoCE).

// The side that owns the memory registers it with no remote access of its
// own, so that its MR's rkey opens nothing, and grants one peer 4 KiB of
// it, for writes only, through a window bound to that connection's QP.
// The peer hands the grant back with a send with invalidate; had it not,
// SetLocalInv would end it here (as closing the Conn would).
func ExampleSendWRs_SetBindMW() {
	ctx := context.Background()
	l, err := hand.Listen(ctx, "192.0.2.1:7471")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	req, err := l.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	pd, err := req.Context().AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	mr, err := pd.Alloc(1<<20, hand.AccessLocalWrite|hand.AccessMWBind)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	ctl, err := pd.Alloc(64, hand.AccessLocalWrite) // the grant goes out from here, the peer's message comes in here
	if err != nil {
		log.Fatal(err)
	}
	defer ctl.Close()
	mw, err := pd.NewMW(hand.MWType2)
	if err != nil {
		log.Fatal(err) // ErrNotSupported on a device without windows
	}
	defer mw.Close()
	recv, _ := hand.NewRecvChain(1, 1)
	defer recv.Close()
	conn, err := req.Accept(ctx, hand.ConnConfig{PD: pd, BeforeConnect: func(c *hand.Conn) error {
		recv.Reserve(1).Set(0, 3, ctl.SGE(32, 32))
		return recv.PostRecv(c.QP())
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	send, _ := hand.NewSendChain(1, 1, 0)
	defer send.Close()
	poller, _ := hand.NewPoller(conn.SendCQ(), 1) // the Conn's one CQ: sends and receives
	defer poller.Close()
	next := func() hand.WC {
		wcs, err := poller.Wait(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if err := wcs[0].Err(); err != nil {
			log.Fatal(err)
		}
		return wcs[0]
	}

	rkey := send.Reserve(1).SetBindMW(0, 1, hand.Signaled, mw, mr, 64<<10, 4096, hand.AccessRemoteWrite)
	if err := send.PostSend(conn.QP()); err != nil {
		log.Fatal(err)
	}
	next() // bound: the rkey works, for this connection's QP only
	grant, _ := hand.NewRemoteBuffer(mr.Addr()+64<<10, 4096, rkey)
	if _, err := grant.AppendBinary(ctl.Bytes()[:0:hand.RemoteBufferSize]); err != nil {
		log.Fatal(err)
	}
	send.Reserve(1).SetSend(0, 2, hand.Signaled, ctl.SGE(0, hand.RemoteBufferSize))
	if err := send.PostSend(conn.QP()); err != nil {
		log.Fatal(err)
	}
	for wc := next(); wc.WRID() != 3; wc = next() { // until the peer's send with invalidate: it is done
	}
	fmt.Printf("the peer wrote %q; rkey %#x opens nothing now\n", mr.Bytes()[64<<10:64<<10+5], rkey)
}

// The peer: it learns the grant from a receive, writes into it, and gives
// it back with a send with invalidate, which ends the window's rkey as it
// arrives (a later write under it fails with a remote access error).
func ExampleSendWRs_SetSendInv() {
	ctx := context.Background()
	mrs := make(chan *hand.MR, 1)
	recv, _ := hand.NewRecvChain(1, 1)
	defer recv.Close()
	conn, err := hand.Dial(ctx, "192.0.2.1:7471", hand.ConnConfig{BeforeConnect: func(c *hand.Conn) error {
		mr, err := c.PD().Alloc(64, hand.AccessLocalWrite)
		if err != nil {
			return err
		}
		mrs <- mr
		recv.Reserve(1).Set(0, 1, mr.SGE(0, hand.RemoteBufferSize))
		return recv.PostRecv(c.QP())
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	mr := <-mrs
	defer mr.Close()
	poller, _ := hand.NewPoller(conn.SendCQ(), 1)
	defer poller.Close()
	wait := func() {
		wcs, err := poller.Wait(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if err := wcs[0].Err(); err != nil {
			log.Fatal(err)
		}
	}
	wait() // the grant
	var grant hand.RemoteBuffer
	if err := grant.UnmarshalBinary(mr.Bytes()[:hand.RemoteBufferSize]); err != nil {
		log.Fatal(err)
	}
	copy(mr.Bytes()[32:], "hello")
	send, _ := hand.NewSendChain(1, 1, 0)
	defer send.Close()
	send.Reserve(1).SetWriteTo(0, 2, hand.Signaled, mr.SGE(32, 5), grant)
	if err := send.PostSend(conn.QP()); err != nil {
		log.Fatal(err)
	}
	wait()
	send.Reserve(1).SetSendInv(0, 3, hand.Signaled, mr.SGE(32, 5), grant.RKey())
	if err := send.PostSend(conn.QP()); err != nil {
		log.Fatal(err)
	}
	wait()
}
