// Command srq shows a shared receive queue: the server posts its receives
// to one SRQ before it listens, accepts -n clients whose QPs all take
// their receives from it and complete into one CQ, and reports each
// message with the QP it came in on (the completion's qp_num) and the
// client that QP is connected to. Each client sends one message, inline.
//
//	srq -listen 192.0.2.1:7471 [-n 3] [-d DEVICE]   server: serves n clients
//	srq [-msg TEXT] 192.0.2.1:7471                  client, one per message
//
// The address is one of the RDMA device's IP addresses (port 0 picks one).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/hand"
)

// msgMax is the longest message: the size of each receive buffer.
const msgMax = 256

func main() {
	listen := flag.String("listen", "", "be the server, listening on `ADDR:PORT`")
	clients := flag.Int("n", 3, "clients the server waits for")
	device := flag.String("d", "", "the server's RDMA device (default the first)")
	msg := flag.String("msg", "hello through the shared receive queue", "what the client sends")
	timeout := flag.Duration("timeout", 30*time.Second, "give up after this long")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("srq: ")
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch {
	case *listen != "" && flag.NArg() == 0 && *clients > 0:
		serve(ctx, *listen, *device, *clients)
	case *listen == "" && flag.NArg() == 1 && len(*msg) <= msgMax:
		send(ctx, flag.Arg(0), *msg)
	default:
		log.Fatalf("give -listen ADDR:PORT and -n of 1 or more to serve, or the server's ADDR:PORT and a -msg of at most %d bytes to send", msgMax)
	}
}

func serve(ctx context.Context, addr, device string, clients int) {
	// librdmacm's context for the device: the QPs Accept makes are on it,
	// so the SRQ, CQ and buffers they share must be too.
	dev, err := hand.CMContext(device)
	if err != nil {
		log.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	ch, err := dev.NewCompChannel() // for Wait
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	cq, err := dev.NewCQ(clients, hand.CQOptions{Channel: ch})
	if err != nil {
		log.Fatal(err)
	}
	defer cq.Close()
	srq, err := pd.NewSRQ(hand.SRQConfig{MaxWR: clients})
	if err != nil {
		log.Fatal(err)
	}
	defer srq.Close()
	mr, err := pd.Alloc(clients*msgMax, hand.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	// One receive a client, each into a buffer of its own, posted before
	// any client can connect: every client's message finds one.
	recv, err := hand.NewRecvChain(clients, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer recv.Close()
	v := recv.Reserve(clients)
	for i := range clients {
		v.Set(i, uint64(i), mr.SGE(i*msgMax, msgMax)) // wr_id: the buffer
	}
	if err := recv.PostSRQRecv(srq); err != nil {
		log.Fatal(err)
	}

	l, err := hand.Listen(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	fmt.Println("listening on", l.Addr())
	peer := make(map[uint32]netip.AddrPort) // QP number -> client
	for range clients {
		req, err := l.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		conn, err := req.Accept(ctx, hand.ConnConfig{PD: pd, SendCQ: cq, SRQ: srq})
		if err != nil {
			log.Fatal(err)
		}
		defer conn.Close()
		peer[conn.QP().Num()] = conn.RemoteAddr()
		fmt.Printf("QP %d connected to %s\n", conn.QP().Num(), conn.RemoteAddr())
	}
	// A message may have arrived before its Accept returned: it waits in
	// the CQ. Every one is reported once all QPs are known.
	poller, err := hand.NewPoller(cq, clients)
	if err != nil {
		log.Fatal(err)
	}
	defer poller.Close()
	for got := 0; got < clients; {
		wcs, err := poller.Wait(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for i := range wcs {
			wc := &wcs[i]
			if err := wc.Err(); err != nil {
				log.Fatalf("receive on QP %d: %v", wc.QPNum(), err)
			}
			buf := mr.Bytes()[int(wc.WRID())*msgMax:][:wc.ByteLen()]
			fmt.Printf("QP %d (%s): %q\n", wc.QPNum(), peer[wc.QPNum()], buf)
			got++
		}
	}
}

func send(ctx context.Context, addr, msg string) {
	// An inline send copies the message into the work request: it needs
	// no registered memory, only room for it in the QP.
	conn, err := hand.Dial(ctx, addr, hand.ConnConfig{Caps: hand.QPCaps{MaxInlineData: msgMax}})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Println("connected from", conn.LocalAddr())
	chain, err := hand.NewSendChain(1, 1, msgMax)
	if err != nil {
		log.Fatal(err)
	}
	defer chain.Close()
	poller, err := hand.NewPoller(conn.SendCQ(), 1)
	if err != nil {
		log.Fatal(err)
	}
	defer poller.Close()
	chain.Reserve(1).SetInline(0, 1, hand.Signaled, []byte(msg))
	if err := chain.PostSend(conn.QP()); err != nil {
		log.Fatal(err)
	}
	wcs, err := poller.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := wcs[0].Err(); err != nil {
		log.Fatalf("send: %v", err)
	}
	fmt.Printf("sent %q\n", msg)
	if err := conn.Disconnect(ctx); err != nil {
		log.Fatal(err)
	}
}
