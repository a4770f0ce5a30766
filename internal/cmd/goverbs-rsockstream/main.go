// Command goverbs-rsockstream is rstream's custom test (librdmacm/examples) on
// goverbs' rsocket package, to run against rstream itself: the client
// (-s) and the server take turns, a 16-byte exchange, then per iteration
// the client sends count transfers of size bytes and the server sends as
// many back. With -v each side's bytes are a running counter, checked by
// the other, as rstream -T v writes and checks them. -tcp runs the same
// test on the kernel's TCP (net.TCPConn), as rstream -T s does on sockets,
// for reference. Both size their buffers as rstream does: -B is its value
// for SO_SNDBUF and SO_RCVBUF (512 KiB by default), which rsocket doubles
// (Config.BufferSize 1 MiB) and the kernel caps at its wmem_max/rmem_max.
//
//	rstream -p 7471 -S 65536 -C 10 -I 100 -T v &   # C server
//	goverbs-rsockstream -s 192.0.2.1 -p 7471 -S 65536 -C 10 -I 100 -v
//
// Each side prints rstream's header and result line (name custom), with
// sizes as plain numbers, the time to the microsecond and usec/xfer to the
// nanosecond. make rsocket-compare (internal/cmd/goverbs-rsockcompare)
// runs it against rstream and TCP.
package main

import (
	"context"
	"errors"
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
	bufSize := flag.Int("B", 1<<19, "buffer size as rstream's -B: the SO_SNDBUF and SO_RCVBUF value, which rsocket doubles")
	tcp := flag.Bool("tcp", false, "run on the kernel's TCP instead of rsocket (rstream -T s)")
	flag.Parse()
	if *size < 1 || *count < 1 || *iters < 1 || *bufSize < 1 {
		fmt.Fprintln(os.Stderr, "goverbs-rsockstream: -S, -C, -I and -B must be at least 1")
		os.Exit(2)
	}
	var c net.Conn
	var err error
	if *tcp {
		c, err = connectTCP(*dst, *bind, *port, *bufSize)
	} else {
		c, err = connectRsocket(*dst, *bind, *port, rsocket.Config{BufferSize: max(2**bufSize, 4096)})
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

// connectRsocket dials dst, or accepts one connection on bind, by rsocket.
func connectRsocket(dst, bind, port string, cfg rsocket.Config) (net.Conn, error) {
	if dst == "" {
		lc := rsocket.ListenConfig{Config: cfg, OnRefused: func(remote net.Addr, err error) {
			fmt.Fprintf(os.Stderr, "goverbs-rsockstream: refused %v: %v\n", remote, err)
		}}
		l, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(bind, port))
		if err != nil {
			return nil, err
		}
		defer l.Close()
		return l.AcceptConn()
	}
	d := rsocket.Dialer{Timeout: 10 * time.Second, Config: cfg}
	if bind != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(bind)}
	}
	for try := 0; ; try++ { // the server may not listen yet
		c, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort(dst, port))
		if err == nil || try == 50 {
			return c, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// connectTCP is connectRsocket on the kernel's TCP, with rstream's socket
// options: its buffer sizes, and no Nagle (Go's default).
func connectTCP(dst, bind, port string, bufSize int) (net.Conn, error) {
	var c net.Conn
	var err error
	if dst == "" {
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort(bind, port)); err != nil {
			return nil, err
		}
		defer l.Close()
		c, err = l.Accept()
	} else {
		d := net.Dialer{Timeout: 10 * time.Second}
		if bind != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(bind)}
		}
		for try := 0; ; try++ { // the server may not listen yet
			if c, err = d.Dial("tcp", net.JoinHostPort(dst, port)); err == nil || try == 50 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err != nil {
		return nil, err
	}
	tc := c.(*net.TCPConn)
	if err := errors.Join(tc.SetReadBuffer(bufSize), tc.SetWriteBuffer(bufSize), tc.SetNoDelay(true)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

type test struct {
	c           net.Conn
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
	fmt.Printf("%-9s %-8s %-8s %-8s %-12s %10s %10s %12s\n", "name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")
	fmt.Printf("%-9s %-8d %-8d %-8d %-12d %9.6fs %10.2f %12.3f\n", "custom", size, count, iters, bytes, d.Seconds(),
		float64(bytes)*8/d.Seconds()/1e9, float64(d.Nanoseconds())/1e3/float64(2*count*iters))
	return nil
}
