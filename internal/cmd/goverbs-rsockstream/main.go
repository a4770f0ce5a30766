// Command goverbs-rsockstream is rstream's custom test (librdmacm/examples) on
// goverbs' rsocket package, to run against rstream itself: the client
// (-s) and the server take turns, a 16-byte exchange, then per iteration
// the client sends count transfers of size bytes and the server sends as
// many back. With -v each side's bytes are a running counter, checked by
// the other, as rstream -T v writes and checks them.
//
//	rstream -p 7471 -S 65536 -C 10 -I 100 -T v &   # C server
//	goverbs-rsockstream -s 192.0.2.1 -p 7471 -S 65536 -C 10 -I 100 -v
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/goverbs/goverbs/rsocket"
)

func main() {
	dst := flag.String("s", "", "server address: run as the client (else the server)")
	bind := flag.String("b", "", "address to bind (the server listens on it; default all)")
	port := flag.String("p", "7471", "port")
	size := flag.Int("S", 65536, "transfer size")
	count := flag.Int("C", 1, "transfers per iteration")
	iters := flag.Int("I", 1000, "iterations")
	verify := flag.Bool("v", false, "write a running counter and check the peer's")
	flag.Parse()
	var c *rsocket.Conn
	var err error
	if *dst != "" {
		d := rsocket.Dialer{Timeout: 10 * time.Second}
		if *bind != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(*bind)}
		}
		for try := 0; ; try++ { // the server may not listen yet
			if c, err = d.DialContext(context.Background(), "tcp", net.JoinHostPort(*dst, *port)); err == nil || try == 50 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	} else {
		var l *rsocket.Listener
		lc := rsocket.ListenConfig{OnRefused: func(remote net.Addr, err error) {
			fmt.Fprintf(os.Stderr, "goverbs-rsockstream: refused %v: %v\n", remote, err)
		}}
		if l, err = lc.Listen(context.Background(), "tcp", net.JoinHostPort(*bind, *port)); err == nil {
			c, err = l.AcceptConn()
			l.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "goverbs-rsockstream:", err)
		os.Exit(1)
	}
	t := &test{c: c, buf: make([]byte, max(*size, 16)), verify: *verify}
	client := *dst != ""
	if err := t.run(client, *size, *count, *iters); err != nil {
		fmt.Fprintln(os.Stderr, "goverbs-rsockstream:", err)
		os.Exit(1)
	}
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "goverbs-rsockstream: close:", err)
		os.Exit(1)
	}
}

type test struct {
	c           *rsocket.Conn
	buf         []byte
	verify      bool
	sent, recvd uint8
	total       int64
}

func (t *test) send(n int) error {
	b := t.buf[:n]
	if t.verify {
		for i := range b {
			b[i] = t.sent
			t.sent++
		}
	}
	_, err := t.c.Write(b)
	return err
}

func (t *test) recv(n int) error {
	b := t.buf[:n]
	if _, err := io.ReadFull(t.c, b); err != nil {
		return err
	}
	if t.verify {
		for i := range b {
			if b[i] != t.recvd {
				return fmt.Errorf("data verification failed at byte %d: %d, want %d", t.total+int64(i), b[i], t.recvd)
			}
			t.recvd++
		}
	}
	t.total += int64(n)
	return nil
}

func (t *test) run(client bool, size, count, iters int) error {
	first, second := t.recv, t.send
	if client {
		first, second = t.send, t.recv
	}
	if err := first(16); err != nil {
		return err
	}
	if err := second(16); err != nil {
		return err
	}
	start := time.Now()
	for range iters {
		for range count {
			if err := first(size); err != nil {
				return err
			}
		}
		for range count {
			if err := second(size); err != nil {
				return err
			}
		}
	}
	d := time.Since(start)
	bytes := 2 * int64(size) * int64(count) * int64(iters)
	fmt.Printf("%-8d%-8d%-8d%10.3fs %10.2f Gb/s %10.2f usec/xfer\n", size, count, iters, d.Seconds(),
		float64(bytes)*8/d.Seconds()/1e9, float64(d.Microseconds())/float64(2*count*iters))
	return nil
}
