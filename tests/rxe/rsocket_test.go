package rxe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/rsocket"
)

// rsocketPair is a Go rsocket client connected to a Go rsocket server on
// the device's address.
func rsocketPair(t *testing.T) (client, server *rsocket.Conn) {
	t.Helper()
	RequireDevice(t)
	return rsocketPairTB(t, rsocket.Config{})
}

// RequireDeviceB is RequireDevice for a benchmark.
func RequireDeviceB(b *testing.B) {
	b.Helper()
	if os.Getenv("GOVERBS_IN_VM") != "1" {
		b.Skip(skipMessage)
	}
}

func rsocketPairB(b *testing.B) (client, server *rsocket.Conn) {
	b.Helper()
	return rsocketPairTB(b, rsocket.Config{})
}

// rsocketPairTB is a Go rsocket client connected to a Go rsocket server
// on the device's address, both with cfg; the Dial may take 10 s.
func rsocketPairTB(t testing.TB, cfg rsocket.Config) (client, server *rsocket.Conn) {
	t.Helper()
	lc := rsocket.ListenConfig{Config: cfg}
	l, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(os.Getenv("RXE_ADDR"), "0"))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer l.Close()
	type res struct {
		c   *rsocket.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.AcceptConn()
		ch <- res{c, err}
	}()
	d := rsocket.Dialer{Timeout: 10 * time.Second, Config: cfg}
	client, err = d.DialContext(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("Dial %v: %v", l.Addr(), err)
	}
	r := <-ch
	if r.err != nil {
		client.Close()
		t.Fatalf("Accept: %v", r.err)
	}
	t.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c
}

func pattern(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// rsEcho checks that a and b, a connected pair, carry data both ways: a
// writes 10000 bytes of pattern seed, b reads them and writes them back,
// all within 10 s. A failure names the pair by what.
func rsEcho(t *testing.T, what string, a, b *rsocket.Conn, seed uint64) {
	t.Helper()
	msg := pattern(10000, seed)
	got := make([]byte, len(msg))
	deadline := time.Now().Add(10 * time.Second)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	defer a.SetDeadline(time.Time{})
	defer b.SetDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() {
		_, err := a.Write(msg)
		errc <- err
	}()
	_, err := io.ReadFull(b, got)
	require.NoError(t, err, what+": reading")
	require.NoError(t, <-errc, what+": writing")
	require.True(t, bytes.Equal(msg, got), what+": bytes differ")
	back := bytes.Clone(got)
	go func() {
		_, err := b.Write(back)
		errc <- err
	}()
	clear(got)
	_, err = io.ReadFull(a, got)
	require.NoError(t, err, what+": reading the echo")
	require.NoError(t, <-errc, what+": writing the echo")
	require.True(t, bytes.Equal(msg, got), what+": echoed bytes differ")
}

// Data goes both ways byte for byte at sizes from 1 byte to 4 MiB, the
// larger ones wrapping the 128 KiB buffers many times; each side writes
// while the other reads.
func TestRsocketEcho(t *testing.T) {
	client, server := rsocketPair(t)
	sizes := []int{1, 7, 64, 65, 2048, 4096, 65535, 65536, 131072, 1 << 20, 4 << 20}
	if testing.Short() {
		sizes = []int{1, 65, 65536, 1 << 20}
	}
	go func() { // the server echoes
		io.Copy(server, server)
	}()
	for i, n := range sizes {
		want := pattern(n, uint64(i))
		errc := make(chan error, 1)
		go func() {
			_, err := client.Write(want)
			errc <- err
		}()
		got := make([]byte, n)
		client.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(client, got); err != nil {
			t.Fatalf("%d bytes: reading the echo: %v", n, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("%d bytes: Write: %v", n, err)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for got[i] == want[i] {
				i++
			}
			t.Fatalf("%d bytes: the echo differs first at byte %d: %#x, want %#x", n, i, got[i], want[i])
		}
	}
}

// CloseWrite ends the peer's reading with io.EOF after the data, and the
// other direction goes on.
func TestRsocketCloseWrite(t *testing.T) {
	client, server := rsocketPair(t)
	msg := pattern(100000, 9)
	go func() {
		client.Write(msg)
		client.CloseWrite()
	}()
	got, err := io.ReadAll(server)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("server read %d bytes (equal: %v), err %v; want %d bytes and io.EOF", len(got), bytes.Equal(got, msg), err, len(msg))
	}
	if _, err := client.Write([]byte("x")); err == nil {
		t.Errorf("Write after CloseWrite succeeded")
	}
	if _, err := server.Write([]byte("still here")); err != nil {
		t.Fatalf("the server's Write after the client's CloseWrite: %v", err)
	}
	b := make([]byte, 10)
	if n, err := io.ReadFull(client, b); err != nil || string(b[:n]) != "still here" {
		t.Fatalf("the client read %q, %v", b[:n], err)
	}
}

// Deadlines end blocked calls, set before the call and during it, with an
// error that is a timeout and matches os.ErrDeadlineExceeded; a Write
// deadline ends a Write the peer does not read.
func TestRsocketDeadlines(t *testing.T) {
	client, server := rsocketPair(t)
	check := func(what string, err error, start time.Time, min time.Duration) {
		t.Helper()
		var ne net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%s: %v, want a timeout matching os.ErrDeadlineExceeded", what, err)
		}
		if d := time.Since(start); d < min || d > min+5*time.Second {
			t.Errorf("%s returned after %v, want about %v", what, d, min)
		}
	}
	b := make([]byte, 10)
	start := time.Now()
	client.SetReadDeadline(start.Add(200 * time.Millisecond))
	_, err := client.Read(b)
	check("Read with a deadline set before", err, start, 200*time.Millisecond)

	client.SetReadDeadline(time.Time{})
	start = time.Now()
	go func() {
		time.Sleep(200 * time.Millisecond)
		client.SetReadDeadline(time.Now())
	}()
	_, err = client.Read(b)
	check("Read with a deadline set during it", err, start, 200*time.Millisecond)

	// The deadline cleared, Read works again.
	client.SetReadDeadline(time.Time{})
	server.Write([]byte("ok"))
	if n, err := client.Read(b); err != nil || string(b[:n]) != "ok" {
		t.Fatalf("Read after the deadline was cleared: %q, %v", b[:n], err)
	}

	// Nobody reads at the server: the client's Write fills the server's
	// receive buffer and blocks until its deadline.
	start = time.Now()
	server.SetWriteDeadline(time.Time{})
	client.SetWriteDeadline(start.Add(300 * time.Millisecond))
	n, err := client.Write(make([]byte, 4<<20))
	check("Write to a peer that does not read", err, start, 300*time.Millisecond)
	if n <= 0 || n >= 4<<20 {
		t.Errorf("the timed-out Write wrote %d bytes, want some and not all", n)
	}
}

// Close ends a blocked Read and a blocked Write with net.ErrClosed; the
// peer's Read then returns io.EOF.
func TestRsocketCloseUnblocks(t *testing.T) {
	client, server := rsocketPair(t)
	errc := make(chan error, 2)
	go func() {
		_, err := client.Read(make([]byte, 10))
		errc <- err
	}()
	go func() {
		_, err := client.Write(make([]byte, 4<<20)) // the server does not read
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond)
	client.Close()
	for range 2 {
		select {
		case err := <-errc:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("a blocked call ended with %v, want net.ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end a blocked call within 10 s")
		}
	}
	server.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, server)
	if err != nil {
		t.Errorf("the server's Read after the client's Close: %v, want io.EOF", err)
	}
}

// Accept's deadline, set before and during a blocked Accept, and Close of
// the listener ending a blocked Accept.
func TestRsocketAcceptDeadline(t *testing.T) {
	RequireDevice(t)
	l, err := rsocket.Listen("tcp", net.JoinHostPort(os.Getenv("RXE_ADDR"), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Now()
	l.SetDeadline(start.Add(200 * time.Millisecond))
	_, err = l.Accept()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Accept with a deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	l.SetDeadline(time.Time{})
	go func() {
		time.Sleep(200 * time.Millisecond)
		l.SetDeadline(time.Now())
	}()
	if _, err = l.Accept(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Accept with a deadline set during it: %v, want os.ErrDeadlineExceeded", err)
	}
	l.SetDeadline(time.Time{})
	go func() {
		time.Sleep(200 * time.Millisecond)
		l.Close()
	}()
	if _, err = l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept ended by Close: %v, want net.ErrClosed", err)
	}
}

// A Read and a Write on each side at once, in both directions, data
// checked byte for byte.
func TestRsocketConcurrent(t *testing.T) {
	client, server := rsocketPair(t)
	n := 16 << 20
	if testing.Short() || raceBuild { // the race build runs it too (RXE_RACE_RUN matches Concurrent)
		n = 2 << 20
	}
	a, b := pattern(n, 1), pattern(n, 2)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	send := func(c *rsocket.Conn, p []byte) {
		defer wg.Done()
		for off := 0; off < len(p); {
			k := min(len(p)-off, 1+int(rand.Uint32N(100000)))
			if _, err := c.Write(p[off : off+k]); err != nil {
				errs <- err
				return
			}
			off += k
		}
	}
	recv := func(c *rsocket.Conn, want []byte) {
		defer wg.Done()
		got := make([]byte, len(want))
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil {
			errs <- err
			return
		}
		if !bytes.Equal(got, want) {
			errs <- errors.New("data differs")
		}
	}
	wg.Add(4)
	go send(client, a)
	go send(server, b)
	go recv(server, a)
	go recv(client, b)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A dial to a port nobody listens on fails, and refused.
func TestRsocketDialRefused(t *testing.T) {
	RequireDevice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d rsocket.Dialer
	_, err := d.DialContext(ctx, "tcp", net.JoinHostPort(os.Getenv("RXE_ADDR"), "1"))
	if err == nil {
		t.Fatal("Dial to a port with no listener succeeded")
	}
	t.Logf("refused: %v", err)
}

// A 64-byte ping-pong between two Go rsockets in one process.
func BenchmarkRsocketPingPong(b *testing.B) {
	RequireDeviceB(b)
	client, server := rsocketPairB(b)
	go io.Copy(server, server)
	buf := make([]byte, 64)
	b.ResetTimer()
	for range b.N {
		if _, err := client.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(client, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// A 64 KiB stream from a Go rsocket to another in one process.
func BenchmarkRsocketStream(b *testing.B) {
	RequireDeviceB(b)
	client, server := rsocketPairB(b)
	go io.Copy(io.Discard, server)
	buf := make([]byte, 65536)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if _, err := client.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// A peer process that exits without closing (the kernel disconnects its
// rdma_cm id) ends a blocked Read, after the data it sent, with an error
// matching syscall.ECONNRESET, within the bound the package documents.
func TestRsocketPeerDies(t *testing.T) {
	if addr := os.Getenv("GOVERBS_RSOCKET_DIE_DIAL"); addr != "" {
		c, err := rsocket.Dial("tcp", addr)
		if err != nil {
			os.Exit(2)
		}
		c.Write([]byte("hi"))
		time.Sleep(500 * time.Millisecond) // the write is acknowledged
		os.Exit(0)                         // no Close: no disconnect message
	}
	RequireDevice(t)
	l, err := rsocket.Listen("tcp", net.JoinHostPort(os.Getenv("RXE_ADDR"), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRsocketPeerDies$")
	cmd.Env = append(os.Environ(), "GOVERBS_RSOCKET_DIE_DIAL="+l.Addr().String())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	l.SetDeadline(time.Now().Add(30 * time.Second))
	c, err := l.AcceptConn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b := make([]byte, 10)
	if n, err := io.ReadFull(c, b[:2]); err != nil || string(b[:n]) != "hi" {
		t.Fatalf("read %q, %v; want \"hi\"", b[:n], err)
	}
	start := time.Now()
	_, err = c.Read(b)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after the peer died: %v after %v, want ECONNRESET", err, time.Since(start))
	}
	t.Logf("the blocked Read ended %v after the data: %v", time.Since(start), err)
}

// Close returns once its disconnect is acknowledged, and at once after the
// peer's, with small writes of its own before it: only some sends ask for
// a completion, and Close must not wait (up to 2 s) for ones that never
// will. The writes are acknowledged by the peer's Reads before each Close.
func TestRsocketCloseAfterSmallWrites(t *testing.T) {
	client, server := rsocketPair(t)
	msg := []byte("small, inline, unsignaled")
	b := make([]byte, len(msg))
	for i := range 5 {
		for _, w := range []*rsocket.Conn{client, server} {
			if _, err := w.Write(msg); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		for _, r := range []*rsocket.Conn{server, client} {
			if _, err := io.ReadFull(r, b); err != nil || !bytes.Equal(b, msg) {
				t.Fatalf("read %d: %q, %v", i, b, err)
			}
		}
	}
	const bound = time.Second // Close's own wait gives up after 2 s
	start := time.Now()
	if err := client.Close(); err != nil {
		t.Fatalf("the client's Close: %v", err)
	}
	if d := time.Since(start); d > bound {
		t.Errorf("the client's Close took %v, want under %v", d, bound)
	}
	if _, err := server.Read(b); err != io.EOF {
		t.Fatalf("the server's Read after the client's Close: %v, want io.EOF", err)
	}
	start = time.Now()
	if err := server.Close(); err != nil {
		t.Fatalf("the server's Close: %v", err)
	}
	if d := time.Since(start); d > bound {
		t.Errorf("the server's Close, after the client's, took %v, want under %v", d, bound)
	}
}
