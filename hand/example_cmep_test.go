package hand_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// An rdma_cm server the rdma_create_ep way: rdma_get_request makes each
// connection's QP on the listener's PD and CQ, which the connections share.
func ExampleListenEP() {
	ctx := context.Background()
	l, err := hand.ListenEP(ctx, "192.0.2.1:7471", hand.ConnConfig{PrivateData: []byte("welcome")})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close() // after the Conns: it fails while they use its PD
	conn, err := l.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Printf("%s sent %q\n", conn.RemoteAddr(), conn.PeerPrivateData())
	conn.WaitDisconnect(ctx)
}

// An rdma_cm client the rdma_create_ep way: one call makes the id and the
// QP, then it connects; the Conn works like Dial's.
func ExampleDialEP() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := hand.DialEP(ctx, "192.0.2.1:7471", hand.ConnConfig{PrivateData: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Printf("server says %q\n", conn.PeerPrivateData())

	mr, err := conn.PD().Alloc(4096, hand.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	copy(mr.Bytes(), "over rdma_create_ep")
	send, _ := hand.NewSendChain(1, 1, 0)
	defer send.Free()
	send.Reserve(1).SetSend(0, 1, verbs.SendSignaled, mr.SGE(0, 19))
	if err := send.PostSendv(conn); err != nil { // rdma_post_sendv
		log.Fatal(err)
	}
	wc := make([]verbs.WC, 1)
	for n := 0; n == 0; n, _ = conn.SendCQ().Poll(wc) {
	}
	if err := conn.Disconnect(ctx); err != nil {
		log.Fatal(err)
	}
}
