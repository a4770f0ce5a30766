// Command rdmawrite shows an RDMA write: the server registers a buffer and
// advertises it in its accept's private data as a hand.RemoteBuffer; the
// client writes a message straight into it, with immediate data that
// consumes a receive the server posted before accepting, so the server
// learns that the bytes have landed, and how many, from that completion.
//
//	rdmawrite -listen 192.0.2.1:7471       server: serves one client
//	rdmawrite [-msg TEXT] 192.0.2.1:7471  client
//
// The address is one of the RDMA device's IP addresses (port 0 picks one).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/hand"
)

// bufSize is the server's buffer, all of which it advertises.
const bufSize = 4096

func main() {
	listen := flag.String("listen", "", "be the server, listening on `ADDR:PORT`")
	msg := flag.String("msg", "hello from the client, written into the server's memory", "what the client writes")
	timeout := flag.Duration("timeout", 30*time.Second, "give up after this long")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("rdmawrite: ")
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch {
	case *listen != "" && flag.NArg() == 0:
		serve(ctx, *listen)
	case *listen == "" && flag.NArg() == 1:
		write(ctx, flag.Arg(0), *msg)
	default:
		log.Fatal("give -listen ADDR:PORT to serve, or the server's ADDR:PORT to write to it")
	}
}

func serve(ctx context.Context, addr string) {
	l, err := hand.Listen(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	fmt.Println("listening on", l.Addr())
	req, err := l.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// The buffer is advertised with the accept, so it is registered before
	// the connection exists: on a PD of the device the request came in on.
	pd, err := req.Context().AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	mr, err := pd.Alloc(bufSize, hand.AccessLocalWrite|hand.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	adv, err := mr.Remote().MarshalBinary()
	if err != nil {
		log.Fatal(err)
	}
	recv, err := hand.NewRecvChain(1, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer recv.Close()
	conn, err := req.Accept(ctx, hand.ConnConfig{PD: pd, PrivateData: adv,
		// The client may write the moment it is connected: the receive its
		// immediate data consumes must be there before the accept goes out.
		// A write's bytes go where the client says, so the receive needs
		// no buffer of its own.
		BeforeConnect: func(c *hand.Conn) error {
			recv.Reserve(1).Set(0, 1, mr.SGE(0, 0))
			return recv.PostRecv(c.QP())
		}})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Printf("offered %s to %s\n", mr.Remote(), conn.RemoteAddr())
	poller, err := hand.NewPoller(conn.RecvCQ(), 1)
	if err != nil {
		log.Fatal(err)
	}
	defer poller.Close()
	wcs, err := poller.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := wcs[0].Err(); err != nil {
		log.Fatalf("receive: %v", err)
	}
	n, ok := wcs[0].Imm()
	if !ok || n > bufSize {
		log.Fatalf("the client's completion says %d bytes (immediate data: %v), of %d", n, ok, bufSize)
	}
	fmt.Printf("%s wrote %d bytes: %q\n", conn.RemoteAddr(), n, mr.Bytes()[:n])
	if err := conn.WaitDisconnect(ctx); err != nil {
		log.Fatal(err)
	}
}

func write(ctx context.Context, addr, msg string) {
	conn, err := hand.Dial(ctx, addr, hand.ConnConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	var remote hand.RemoteBuffer
	if err := remote.UnmarshalBinary(conn.PeerPrivateData()[:hand.RemoteBufferSize]); err != nil {
		log.Fatalf("the server's private data: %v", err)
	}
	// Slice refuses a message longer than what the server advertised.
	dst, err := remote.Slice(0, len(msg))
	if err != nil {
		log.Fatal(err)
	}
	// The device reads what it writes from registered memory too.
	mr, err := conn.PD().Alloc(len(msg), hand.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	copy(mr.Bytes(), msg)

	send, err := hand.NewSendChain(1, 1, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer send.Close()
	poller, err := hand.NewPoller(conn.SendCQ(), 1)
	if err != nil {
		log.Fatal(err)
	}
	defer poller.Close()
	// The immediate data, the message's length, reaches the server's
	// receive after the bytes are in its memory.
	send.Reserve(1).SetWriteImmTo(0, 1, hand.Signaled, uint32(len(msg)), mr.SGE(0, len(msg)), dst)
	if err := send.PostSend(conn.QP()); err != nil {
		log.Fatal(err)
	}
	wcs, err := poller.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := wcs[0].Err(); err != nil {
		log.Fatalf("RDMA write to %s: %v", dst, err)
	}
	fmt.Printf("wrote %s\n", dst)
	if err := conn.Disconnect(ctx); err != nil {
		log.Fatal(err)
	}
}
