package hand_test

import (
	"context"
	"fmt"
	"log"

	"github.com/goverbs/goverbs/hand"
)

// Receive before accept: the server posts the connection's first receive
// in BeforeConnect, once the QP exists and before rdma_accept, as
// librdmacm's rdma_server does. A client that sends as soon as Dial returns
// then finds it, even with RNR retries off. Dial takes the same hook, for
// a client that must receive the server's first message.
func ExampleConnConfig_beforeConnect() {
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
	recv, _ := hand.NewRecvChain(1, 1)
	defer recv.Close()
	var mr *hand.MR
	conn, err := req.Accept(ctx, hand.ConnConfig{
		RNRRetryCount: hand.NoRetry, // a send that finds no receive fails rather than waits
		BeforeConnect: func(c *hand.Conn) (err error) {
			// c's QP exists, the client cannot send yet: register the
			// buffer on c's PD and post the receive.
			if mr, err = c.PD().Alloc(4096, hand.AccessLocalWrite); err != nil {
				return err // the request is rejected
			}
			recv.Reserve(1).Set(0, 1, mr.SGE(0, 4096))
			if err := recv.PostRecvv(c); err != nil {
				mr.Close() // before Accept closes c and its PD
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
	poller, _ := hand.NewPoller(conn.RecvCQ(), 1)
	defer poller.Close()
	wcs, err := poller.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := wcs[0].Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s says %q\n", conn.RemoteAddr(), mr.Bytes()[:wcs[0].ByteLen()])
	conn.WaitDisconnect(ctx) // the client hangs up
}
