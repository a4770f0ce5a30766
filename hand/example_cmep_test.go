package hand_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/hand"
)

// An rdma_cm server the rdma_create_ep way, as librdmacm's rdma_server:
// rdma_get_request makes each connection's QP on the listener's PD and CQ
// (which the connections share), the server posts its receive, and only
// then accepts, so the client's first send finds it.
func ExampleListenEP() {
	ctx := context.Background()
	l, err := hand.ListenEP(ctx, "192.0.2.1:7471", hand.ConnConfig{PrivateData: []byte("welcome")})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close() // after the Conns: it fails while they use its PD
	mr, err := l.PD().Alloc(4096, hand.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	recv, _ := hand.NewRecvChain(1, 1)
	defer recv.Close()
	poller, _ := hand.NewPoller(l.RecvCQ(), 1)
	defer poller.Close()

	req, err := l.GetRequest(ctx) // rdma_get_request: the QP is made
	if err != nil {
		log.Fatal(err)
	}
	recv.Reserve(1).Set(0, 1, mr.SGE(0, 4096))
	if err := recv.PostRecvv(req.Conn()); err != nil { // rdma_post_recvv, before the accept
		log.Fatal(err)
	}
	conn, err := req.Accept(ctx) // rdma_accept
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Printf("%s sent %q\n", conn.RemoteAddr(), conn.PeerPrivateData())
	wcs, err := poller.Wait(ctx) // rdma_get_recv_comp
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("and then %q\n", mr.Bytes()[:wcs[0].ByteLen()])
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
	defer send.Close()
	poller, _ := hand.NewPoller(conn.SendCQ(), 1)
	defer poller.Close()
	send.Reserve(1).SetSend(0, 1, hand.Signaled, mr.SGE(0, 19))
	if err := send.PostSendv(conn); err != nil { // rdma_post_sendv
		log.Fatal(err)
	}
	if _, err := poller.Wait(ctx); err != nil { // rdma_get_send_comp
		log.Fatal(err)
	}
	if err := conn.Disconnect(ctx); err != nil {
		log.Fatal(err)
	}
}
