package hand_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/hand"
)

// A multicast sender, as librdmacm's mckey -s: one UD QP bound to a local
// address, a group joined, a datagram sent through the group's AH to its
// QPN and Q_Key. A receiver posts its receives (GRH room first: see
// UDRecvSGE) before it joins.
func ExampleMulticast_Join() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := hand.NewMulticast(ctx, "192.0.2.1", hand.UDConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close() // leaves the groups still joined
	g, err := m.Join(ctx, "239.1.2.3", hand.JoinOptions{})
	if err != nil {
		log.Fatal(err)
	}
	mr, err := m.PD().Alloc(4096, hand.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	copy(mr.Bytes(), "hello, group")
	send, _ := hand.NewSendChain(1, 1, 0)
	defer send.Close()
	send.Reserve(1).SetUD(0, 1, hand.Signaled, mr.SGE(0, 12), g.AH(), g.QPN(), g.QKey())
	if err := send.PostSend(m.QP()); err != nil {
		log.Fatal(err)
	}
	poller, _ := hand.NewPoller(m.SendCQ(), 1)
	defer poller.Close()
	wcs, err := poller.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent to", g.Addr(), wcs[0].Err())
	if err := g.Leave(); err != nil {
		log.Fatal(err)
	}
}
