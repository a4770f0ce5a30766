package hand_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// A datagram client over rdma_cm, as librdmacm's udaddy: DialUD learns the
// listener's UD QP (its AH, QPN and Q_Key come back in the SIDR answer),
// the receive for the reply is posted in BeforeConnect with room for the
// GRH that precedes every UD payload, and one datagram goes out.
func ExampleDialUD() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recv, _ := hand.NewRecvChain(1, 1)
	defer recv.Close()
	var mr *hand.MR
	conn, err := hand.DialUD(ctx, "192.0.2.1:7174", hand.UDConfig{
		BeforeConnect: func(c *hand.UDConn) (err error) {
			if mr, err = c.PD().Alloc(4096, hand.AccessLocalWrite); err != nil {
				return err
			}
			recv.Reserve(1).Set(0, 1, hand.UDRecvSGE(mr.SGE(0, 0).Addr, 1024, mr.LKey()))
			if err := recv.PostRecv(c.QP()); err != nil {
				mr.Close()
				return err
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	defer mr.Close()
	copy(mr.Bytes()[2048:], "hello, datagram")
	send, _ := hand.NewSendChain(1, 1, 0)
	defer send.Close()
	send.Reserve(1).SetUD(0, 2, hand.Signaled, mr.SGE(2048, 15), conn.AH(), conn.RemoteQPN(), conn.RemoteQKey())
	if err := send.PostSend(conn.QP()); err != nil {
		log.Fatal(err)
	}
	poller, _ := hand.NewPoller(conn.SendCQ(), 2) // one CQ for both directions
	defer poller.Close()
	for got := 0; got < 2; {
		wcs, err := poller.Wait(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for i := range wcs {
			if err := wcs[i].Err(); err != nil {
				log.Fatalf("WR %d: %v", wcs[i].WRID(), err)
			}
			if wcs[i].IsRecv() {
				payload := mr.Bytes()[hand.GRHSize:wcs[i].ByteLen()]
				fmt.Printf("reply from QP %d: %q\n", wcs[i].SrcQP(), payload)
			}
		}
		got += len(wcs)
	}
}

// A failed completion: only its WRID, Status, QPNum and VendorErr mean
// anything (WC's accessors return zero values for the rest), and Err gives
// the status as an error to match. A flushed WR is what a QP in the error
// state returns for every WR it held: the connection is gone, not this
// WR's fault. Any other status is this WR's own, and on an RC QP it moves
// the QP to the error state too, so the WRs after it come back flushed.
func ExampleStatusError() {
	conn, err := hand.Dial(context.Background(), "192.0.2.1:7471", hand.ConnConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	poller, _ := hand.NewPoller(conn.SendCQ(), 16)
	defer poller.Close()
	wcs, err := poller.Wait(context.Background())
	if err != nil {
		log.Fatal(err) // the poll or the wait failed, not a WR
	}
	for i := range wcs {
		var st hand.StatusError
		switch err := wcs[i].Err(); {
		case err == nil:
			// done: its buffer may be reused
		case errors.As(err, &st) && verbs.WCStatus(st) == verbs.WCWRFlushErr:
			fmt.Printf("WR %d flushed: the QP is in the error state\n", wcs[i].WRID())
		default:
			fmt.Printf("WR %d on QP %d failed: %v (vendor error %#x)\n",
				wcs[i].WRID(), wcs[i].QPNum(), err, wcs[i].VendorErr())
		}
	}
}
