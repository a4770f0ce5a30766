// Command pollwait shows the ways to learn of a completion, and what each
// costs. Client and server run one ping-pong loop three times, learning of
// each completion by busy-polling (Poller.PollSpin), by parking the
// goroutine on Go's netpoller until the CQ's event (Poller.Wait), and by
// blocking the thread in the event's read (Poller.WaitThread), and print
// the round trip and the CPU they used for each. Polling answers first and
// burns a core; waiting frees the core and adds a wake-up to every message.
//
//	pollwait -listen 192.0.2.1:7471 [-n 1000] [-s 64]   server
//	pollwait [-n 1000] [-s 64] 192.0.2.1:7471           client (same -n and -s)
package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/hand"
)

func main() {
	listen := flag.String("listen", "", "be the server, listening on `ADDR:PORT`")
	iters := flag.Int("n", 1000, "round trips for each way of waiting")
	size := flag.Int("s", 64, "message size in bytes, 8 or more")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("pollwait: ")
	server := *listen != ""
	if *size < 8 || *iters < 1 || server == (flag.NArg() == 1) {
		log.Fatal("give -listen ADDR:PORT to serve, or the server's ADDR:PORT; -n of 1 or more and -s of 8 or more")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := &peer{size: *size}
	var err error
	if p.recv, err = hand.NewRecvChain(1, 1); err != nil {
		log.Fatal(err)
	}
	defer p.recv.Close()
	if p.send, err = hand.NewSendChain(1, 1, 0); err != nil {
		log.Fatal(err)
	}
	defer p.send.Close()
	// BeforeConnect posts the first receive before the peer can send.
	cfg := hand.ConnConfig{BeforeConnect: p.setup}
	var conn *hand.Conn
	if server {
		conn, err = accept(ctx, *listen, cfg)
	} else {
		conn, err = hand.Dial(ctx, flag.Arg(0), cfg)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	defer p.mr.Close()
	if p.poller, err = hand.NewPoller(conn.RecvCQ(), 2); err != nil { // the Conn's one CQ
		log.Fatal(err)
	}
	defer p.poller.Close()

	for _, mode := range []string{"spin", "wait", "thread"} {
		start, cpu0 := time.Now(), cpuTime()
		p.pingpong(ctx, mode, *iters, !server)
		wall, cpu := time.Since(start), cpuTime()-cpu0
		fmt.Printf("%-6s %d round trips of %d bytes: %.1f us each, %.0f%% of a CPU\n",
			mode, *iters, *size, float64(wall.Microseconds())/float64(*iters), 100*cpu.Seconds()/wall.Seconds())
	}
	if server {
		err = conn.WaitDisconnect(ctx)
	} else {
		err = conn.Disconnect(ctx)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func accept(ctx context.Context, addr string, cfg hand.ConnConfig) (*hand.Conn, error) {
	l, err := hand.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	fmt.Println("listening on", l.Addr())
	req, err := l.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return req.Accept(ctx, cfg)
}

// peer is one side: an MR whose first half receives and second half
// sends, with one receive posted at all times.
type peer struct {
	size   int
	qp     *hand.QP
	mr     *hand.MR
	recv   *hand.RecvChain
	send   *hand.SendChain
	poller *hand.Poller
	early  bool // the next mode's first message has come (see pingpong)
}

// setup is BeforeConnect: the QP exists, the peer cannot send yet.
func (p *peer) setup(c *hand.Conn) (err error) {
	if p.mr, err = c.PD().Alloc(2*p.size, hand.AccessLocalWrite); err != nil {
		return err
	}
	p.qp = c.QP()
	if err = p.postRecv(); err != nil {
		p.mr.Close() // else the Conn's PD cannot be freed
	}
	return err
}

func (p *peer) postRecv() error {
	p.recv.Reserve(1).Set(0, 0, p.mr.SGE(0, p.size))
	return p.recv.PostRecv(p.qp)
}

// pingpong sends iters numbered messages and receives as many, the
// client sending first and each side sending again once a message has
// come. It checks each message's number and size, and returns once its
// own sends have completed too.
//
// The server may get the client's first message of the next mode while
// it waits for its last send's completion: the client had the answer and
// went on. That message is checked and kept (p.early) for the next mode.
func (p *peer) pingpong(ctx context.Context, mode string, iters int, client bool) {
	sent, completed, received := 0, 0, 0
	took := func() { // a message came: answer it
		received++
		// Before this side sends: the answer may come at once.
		if err := p.postRecv(); err != nil {
			log.Fatal(err)
		}
		next := received // the client's next message
		if !client {
			next = received - 1 // the server's echo
		}
		if next < iters {
			p.sendOut(next)
			sent++
		}
	}
	if client {
		p.sendOut(0)
		sent++
	}
	if p.early {
		p.early = false
		took()
	}
	for received < iters || completed < sent {
		wcs := p.next(ctx, mode)
		for i := range wcs {
			if !wcs[i].IsRecv() {
				completed++
				continue
			}
			want := received
			if received == iters {
				want = 0 // the next mode's first
			}
			if n := binary.BigEndian.Uint64(p.mr.Bytes()); n != uint64(want) || int(wcs[i].ByteLen()) != p.size {
				log.Fatalf("%s: received %d bytes numbered %d, want %d numbered %d", mode, wcs[i].ByteLen(), n, p.size, want)
			}
			if received == iters {
				p.early = true
				continue
			}
			took()
		}
	}
}

// sendOut sends the MR's second half, numbered n. The send that used it
// last was answered, so the device is done with it.
func (p *peer) sendOut(n int) {
	binary.BigEndian.PutUint64(p.mr.Bytes()[p.size:], uint64(n))
	p.send.Reserve(1).SetSend(0, 1, hand.Signaled, p.mr.SGE(p.size, p.size))
	if err := p.send.PostSend(p.qp); err != nil {
		log.Fatal(err)
	}
}

// next returns the next completions, learnt of the way mode says. It ends
// the program on any that did not succeed.
func (p *peer) next(ctx context.Context, mode string) (wcs []hand.WC) {
	var err error
	switch mode {
	case "spin": // a few microseconds in C at a time, then back to Go
		for len(wcs) == 0 && err == nil {
			if wcs, err = p.poller.PollSpin(64); len(wcs) == 0 && err == nil {
				err = ctx.Err()
			}
		}
	case "wait":
		wcs, err = p.poller.Wait(ctx)
	default:
		wcs, err = p.poller.WaitThread(ctx)
	}
	for i := range wcs {
		err = cmp.Or(err, wcs[i].Err())
	}
	if err != nil {
		log.Fatalf("%s: %v", mode, err)
	}
	return wcs
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
