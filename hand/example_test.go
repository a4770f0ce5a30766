package hand_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/goverbs/goverbs/hand"
)

// These examples need an RDMA device, so they are compiled but not run by
// go test (they have no Output line). The soft-RoCE tests in tests/rxe run
// the same flows.

// Connect an RC QP to a peer that runs the same program, exchanging QP
// numbers, PSNs and GIDs over a TCP side channel, then send one message and
// wait for its completion on the netpoller.
func ExampleQP_Connect() {
	side, err := net.Dial("tcp", "peer.example:18515") // any side channel will do
	if err != nil {
		log.Fatal(err)
	}
	defer side.Close()

	dev, err := hand.Open("") // the first device; or hand.Open("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	gid, err := dev.RoCEv2IPv4GID(1) // the GID index RoCE v2 traffic must use
	if err != nil {
		log.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	ch, err := dev.NewCompChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	cq, err := dev.NewCQ(64, hand.CQOptions{Channel: ch})
	if err != nil {
		log.Fatal(err)
	}
	defer cq.Close()
	mr, err := pd.Alloc(1<<20, hand.AccessLocalWrite|hand.AccessRemoteWrite) // mmap'd, outside the Go heap
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	qp, err := pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: cq, Caps: hand.QPCaps{MaxSendWR: 16, MaxRecvWR: 16}})
	if err != nil {
		log.Fatal(err)
	}
	defer qp.Close()

	// Tell the peer where this QP is; learn where its QP is.
	local := hand.Endpoint{QPN: qp.Num(), PSN: hand.RandomPSN(), GID: gid.GID}
	out, _ := local.MarshalBinary()
	if _, err := side.Write(out); err != nil {
		log.Fatal(err)
	}
	in := make([]byte, hand.EndpointSize)
	if _, err := side.Read(in); err != nil {
		log.Fatal(err)
	}
	var remote hand.Endpoint
	if err := remote.UnmarshalBinary(in); err != nil {
		log.Fatal(err)
	}

	// RESET -> INIT -> RTR -> RTS in one call.
	err = qp.Connect(hand.ConnectAttr{SGIDIndex: gid.Index, Access: hand.AccessLocalWrite | hand.AccessRemoteWrite, PSN: local.PSN, Remote: remote})
	if err != nil {
		log.Fatal(err) // e.g. "ibv_modify_qp(RTR): invalid argument"
	}

	// The peer has posted a receive (a real program agrees on that over
	// the side channel too); send it the first 13 bytes of the MR.
	copy(mr.Bytes(), "hello, peer!\n")
	send, err := hand.NewSendChain(1, 1, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer send.Close()
	poller, err := hand.NewPoller(cq, 16)
	if err != nil {
		log.Fatal(err)
	}
	defer poller.Close()
	send.Reserve(1).SetSend(0, 1, hand.Signaled, mr.SGE(0, 13))
	if err := send.PostSend(qp); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wcs, err := poller.Wait(ctx) // parked on the netpoller, no thread held
	if err != nil {
		log.Fatal(err)
	}
	for i := range wcs {
		fmt.Println(wcs[i].WRID(), wcs[i].StatusString())
	}
}

// An rdma_cm server: accept connections, reading the client's private
// data, and receive one message on each, posting the receive before the
// accept so that the client's first send finds it.
func ExampleListen() {
	ctx := context.Background()
	l, err := hand.Listen(ctx, "192.0.2.1:7471")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	recv, _ := hand.NewRecvChain(1, 1) // for the accepts, one at a time
	defer recv.Close()
	for {
		req, err := l.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("request from %s: %q\n", req.RemoteAddr(), req.PrivateData())
		var mr *hand.MR
		conn, err := req.Accept(ctx, hand.ConnConfig{PrivateData: []byte("welcome"), BeforeConnect: func(c *hand.Conn) (err error) {
			if mr, err = c.PD().Alloc(4096, hand.AccessLocalWrite); err != nil {
				return err
			}
			recv.Reserve(1).Set(0, 1, mr.SGE(0, 4096))
			if err = recv.PostRecvv(c); err != nil { // rdma_post_recvv
				mr.Close()
			}
			return err
		}})
		if err != nil {
			log.Print(err)
			continue
		}
		go func() {
			defer conn.Close()
			defer mr.Close()
			poller, _ := hand.NewPoller(conn.RecvCQ(), 1)
			defer poller.Close()
			wcs, err := poller.Wait(ctx) // rdma_get_recv_comp, without a thread
			if err != nil {
				log.Print(err)
				return
			}
			fmt.Printf("%s says %q\n", conn.RemoteAddr(), mr.Bytes()[:wcs[0].ByteLen()])
			conn.WaitDisconnect(ctx) // the client hangs up
		}()
	}
}

// An rdma_cm client: dial with a deadline and private data, send one
// message, hang up.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := hand.Dial(ctx, "192.0.2.1:7471", hand.ConnConfig{PrivateData: []byte("hello")})
	if err != nil {
		// No listener: "goverbs: dial 192.0.2.1:7471: connecting: rdma_connect:
		// RDMA_CM_EVENT_REJECTED (no listener at that address and port)",
		// and errors.Is(err, syscall.ECONNREFUSED).
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Printf("server says %q\n", conn.PeerPrivateData())

	mr, err := conn.PD().Alloc(4096, hand.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	copy(mr.Bytes(), "over rdma_cm")
	send, _ := hand.NewSendChain(1, 1, 0)
	defer send.Close()
	poller, _ := hand.NewPoller(conn.SendCQ(), 1)
	defer poller.Close()
	send.Reserve(1).SetSend(0, 1, hand.Signaled, mr.SGE(0, 12))
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
