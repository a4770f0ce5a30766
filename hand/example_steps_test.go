package hand_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/hand"
)

// Dial one step at a time: from a chosen source address, timing each step,
// with the first receive posted between CreateQP and Connect, so that the
// server's first send finds it even with RNR retries off. Dial does the
// same steps in one call (with ConnConfig.LocalAddr for the source
// address and BeforeConnect for the receive).
func ExampleNewConn() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := hand.NewConn(hand.ConnConfig{RNRRetryCount: hand.NoRetry})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close() // at any step: releases what the steps made
	var mr *hand.MR
	for _, s := range []struct {
		name string
		do   func() error
	}{
		{"bind addr", func() error { return conn.Bind(netip.MustParseAddrPort("192.0.2.1:0")) }},
		{"resolve addr", func() error { return conn.ResolveAddr(ctx, "192.0.2.1:7471") }},
		{"resolve route", func() error { return conn.ResolveRoute(ctx) }},
		{"create qp", conn.CreateQP},
		{"post receive", func() (err error) {
			// The QP exists, the server cannot send yet.
			if mr, err = conn.PD().Alloc(4096, hand.AccessLocalWrite); err != nil {
				return err
			}
			recv, err := hand.NewRecvChain(1, 1)
			if err != nil {
				return err
			}
			defer recv.Close()
			recv.Reserve(1).Set(0, 1, mr.SGE(0, 4096))
			return recv.PostRecvv(conn)
		}},
		{"connect", func() error { return conn.Connect(ctx) }},
	} {
		start := time.Now()
		if err := s.do(); err != nil {
			log.Fatal(err) // names the step; Close (deferred) releases the rest
		}
		fmt.Printf("%-13s %v\n", s.name, time.Since(start))
	}
	defer mr.Close() // before conn.Close: it is on the Conn's own PD
	fmt.Println("connected", conn.LocalAddr(), "->", conn.RemoteAddr())
	conn.Disconnect(ctx)
}
