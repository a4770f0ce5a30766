// Command rdmaread shows an RDMA read: the server fills a buffer and
// advertises it in its accept's private data as a hand.RemoteBuffer; the
// client reads it into its own registered buffer, with no receive, send or
// CPU on the server's side, and prints it.
//
//	rdmaread -listen 192.0.2.1:7471 [-msg TEXT]   server: serves one client
//	rdmaread 192.0.2.1:7471                      client
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

// maxRead bounds what the client reads: the length comes from the peer.
const maxRead = 1 << 20

func main() {
	listen := flag.String("listen", "", "be the server, listening on `ADDR:PORT`")
	msg := flag.String("msg", "hello from the server's memory", "what the server offers to read")
	timeout := flag.Duration("timeout", 30*time.Second, "give up after this long")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("rdmaread: ")
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch {
	case *listen != "" && flag.NArg() == 0:
		serve(ctx, *listen, *msg)
	case *listen == "" && flag.NArg() == 1:
		read(ctx, flag.Arg(0))
	default:
		log.Fatal("give -listen ADDR:PORT to serve, or the server's ADDR:PORT to read from it")
	}
}

func serve(ctx context.Context, addr, msg string) {
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
	mr, err := pd.Alloc(len(msg), hand.AccessRemoteRead) // read by the peer, written only by this program
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	copy(mr.Bytes(), msg)
	// Alloc rounds up to whole pages: advertise only the message's bytes.
	offer, err := mr.Remote().Slice(0, len(msg))
	if err != nil {
		log.Fatal(err)
	}
	adv, err := offer.MarshalBinary()
	if err != nil {
		log.Fatal(err)
	}
	// ResponderResources: how many of the client's reads may be in
	// flight at this side at once.
	conn, err := req.Accept(ctx, hand.ConnConfig{PD: pd, PrivateData: adv, ResponderResources: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Printf("offered %d bytes to %s: %s\n", len(msg), conn.RemoteAddr(), offer)
	// The read needs nothing of this program: wait for the client to hang up.
	if err := conn.WaitDisconnect(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("client disconnected")
}

func read(ctx context.Context, addr string) {
	// InitiatorDepth: how many reads this side may have in flight at the
	// server at once.
	conn, err := hand.Dial(ctx, addr, hand.ConnConfig{InitiatorDepth: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	var remote hand.RemoteBuffer
	if err := remote.UnmarshalBinary(conn.PeerPrivateData()[:hand.RemoteBufferSize]); err != nil {
		log.Fatalf("the server's private data: %v", err)
	}
	if remote.Len() == 0 || remote.Len() > maxRead {
		log.Fatalf("the server offers %d bytes: want 1 to %d", remote.Len(), maxRead)
	}
	// The device writes what it reads into this buffer: local write access.
	mr, err := conn.PD().Alloc(remote.Len(), hand.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()

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
	send.Reserve(1).SetReadFrom(0, 1, hand.Signaled, mr.SGE(0, remote.Len()), remote)
	if err := send.PostSend(conn.QP()); err != nil {
		log.Fatal(err)
	}
	// The read's data is in mr once its completion says success, not before.
	wcs, err := poller.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := wcs[0].Err(); err != nil {
		log.Fatalf("RDMA read of %s: %v", remote, err)
	}
	fmt.Printf("read %s: %q\n", remote, mr.Bytes()[:remote.Len()])
	if err := conn.Disconnect(ctx); err != nil {
		log.Fatal(err)
	}
}
