// Echo is an rdma_cm echo on hand: the server sends back what the client
// sends. Each side posts its receive before the connection is live.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"

	"github.com/goverbs/goverbs/hand"
)

func main() {
	server := flag.Bool("server", false, "listen, and echo one client's message")
	addr := flag.String("addr", ":7471", "where to listen, or the server to dial (host:7471)")
	msg := flag.String("msg", "hello, RDMA", "what the client sends")
	flag.Parse()
	ctx := context.Background()
	rc, sc := must(hand.NewRecvChain(1, 1)), must(hand.NewSendChain(1, 1, 0))
	defer rc.Close()
	defer sc.Close()
	var conn *hand.Conn
	var buf *hand.MR // registered on the new Conn's PD, before the connection
	cfg := hand.ConnConfig{RNRRetryCount: hand.NoRetry, BeforeConnect: func(c *hand.Conn) error {
		buf = must(c.PD().Alloc(4096, hand.AccessLocalWrite))
		rc.Reserve(1).Set(0, 1, buf.SGE(0, 4096))
		return rc.PostRecvv(c) // before the peer can send: it needs no RNR retry
	}}
	send := func(n int) { sc.Reserve(1).SetSend(0, 2, hand.Signaled, buf.SGE(0, n)); must(0, sc.PostSendv(conn)) }
	if *server {
		l := must(hand.Listen(ctx, *addr))
		defer l.Close()
		conn = must(must(l.Accept(ctx)).Accept(ctx, cfg))
	} else {
		conn = must(hand.Dial(ctx, *addr, cfg))
		send(copy(buf.Bytes(), *msg)) // sent before the echo can land on it
	}
	defer conn.Close()
	defer buf.Close() // before the Conn, whose PD it is on
	poller := must(hand.NewPoller(conn.RecvCQ(), 1))
	defer poller.Close()
	for range 2 { // a receive and a send complete on each side, in either order
		wc := must(poller.Wait(ctx))[0]
		must(0, wc.Err())
		if wc.IsRecv() && *server {
			send(int(wc.ByteLen())) // the echo, from where the message landed
		} else if wc.IsRecv() {
			fmt.Printf("%s\n", buf.Bytes()[:wc.ByteLen()])
		}
	}
	must(0, conn.Disconnect(ctx))
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}
