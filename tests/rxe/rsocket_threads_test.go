package rxe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/rsocket"
)

// idleThreadsMax is how many OS threads a thousand idle connections may
// add to the process: a handful, for the runtime's and the package's own
// (the netpoller's, rdma_cm's), none per connection.
const idleThreadsMax = 8

// osThreads is the process's OS thread count, from /proc/self/status.
func osThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				t.Fatalf("/proc/self/status: %q", line)
			}
			return n
		}
	}
	t.Fatal("/proc/self/status has no Threads line")
	return 0
}

// A thousand idle connections, both ends in this process, each end with a
// goroutine blocked in Read (as a server's per-connection goroutine is
// between requests), add at most idleThreadsMax OS threads. Each
// connection first carries a byte each way, so that all are live; then
// the client ends close and every server end must read io.EOF. Under
// -test.short (the release matrix) 100 connections.
func TestRsocketIdleThreads(t *testing.T) {
	RequireDevice(t)
	n := 1000
	if testing.Short() {
		n = 100
	}
	// Two ends a connection, each with a few descriptors (rdma_cm's event
	// channel, the completion channel): more than the VM's default 1,024.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if want := uint64(16 * n); lim.Cur < want {
		raised := syscall.Rlimit{Cur: want, Max: max(lim.Max, want)}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			t.Fatalf("raising RLIMIT_NOFILE from %d/%d to %d: %v", lim.Cur, lim.Max, want, err)
		}
		t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })
	}
	// Small buffers: 2,000 ends of 2 x 128 KiB would pin 512 MiB of the
	// VM's 2 GiB, and this test is about threads.
	cfg := rsocket.Config{BufferSize: 16 << 10, QueueSize: 16}
	before := osThreads(t)
	lc := rsocket.ListenConfig{Config: cfg}
	l, err := lc.Listen(t.Context(), "tcp", net.JoinHostPort(localAddr(), "0"))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer l.Close()

	var wg sync.WaitGroup
	errs := make(chan error, 2*n+1)
	servers := make(chan *rsocket.Conn, n)
	var serverEOF sync.WaitGroup
	wg.Add(1)
	go func() { // accepts; each server end echoes one byte, then reads to EOF
		defer wg.Done()
		for range n {
			c, err := l.AcceptConn()
			if err != nil {
				errs <- fmt.Errorf("accept: %w", err)
				return
			}
			servers <- c
			serverEOF.Add(1)
			go func() {
				defer serverEOF.Done()
				b := make([]byte, 1)
				if _, err := io.ReadFull(c, b); err != nil {
					errs <- fmt.Errorf("server read: %w", err)
					return
				}
				if _, err := c.Write(b); err != nil {
					errs <- fmt.Errorf("server write: %w", err)
					return
				}
				if k, err := c.Read(b); k != 0 || err != io.EOF {
					errs <- fmt.Errorf("server end idle, then its client closed: Read = %d, %v; want 0, io.EOF", k, err)
				}
			}()
		}
	}()

	start := time.Now()
	d := rsocket.Dialer{Timeout: 30 * time.Second, Config: cfg}
	clients := make([]*rsocket.Conn, 0, n)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	var idle sync.WaitGroup
	for i := range n {
		c, err := d.DialContext(t.Context(), "tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("dial %d of %d: %v (threads: %d before, %d now)", i+1, n, err, before, osThreads(t))
		}
		clients = append(clients, c)
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatalf("client %d write: %v", i, err)
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil || b[0] != byte(i) {
			t.Fatalf("client %d: echo %v, %v", i, b, err)
		}
		idle.Add(1)
		go func() { // blocked in Read until the test closes c
			defer idle.Done()
			if k, err := c.Read(b); k != 0 || !errors.Is(err, net.ErrClosed) {
				errs <- fmt.Errorf("client end idle, then closed: Read = %d, %v; want 0, net.ErrClosed", k, err)
			}
		}()
	}
	setup := time.Since(start)
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // every Read goroutine parked
	during := osThreads(t)
	t.Logf("%d idle connections (both ends in this process, %d goroutines blocked in Read), set up in %v (%v each): OS threads %d before, %d with them (+%d; at most +%d allowed)",
		n, 2*n, setup.Round(time.Millisecond), (setup / time.Duration(n)).Round(time.Microsecond), before, during, during-before, idleThreadsMax)
	if during-before > idleThreadsMax {
		t.Errorf("%d idle connections added %d OS threads, more than %d", n, during-before, idleThreadsMax)
	}

	// Closed all at once: each Close waits for its peer's acknowledgement.
	start = time.Now()
	var closing sync.WaitGroup
	for _, c := range clients {
		closing.Go(func() {
			if err := c.Close(); err != nil {
				errs <- fmt.Errorf("client Close: %w", err)
			}
		})
	}
	closing.Wait()
	clients = nil
	done := make(chan struct{})
	go func() { idle.Wait(); serverEOF.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("not every end saw its connection close within 60 s")
	}
	close(servers)
	for c := range servers {
		c.Close()
	}
	close(errs)
	var msgs bytes.Buffer
	k := 0
	for err := range errs {
		if k++; k <= 5 {
			fmt.Fprintln(&msgs, err)
		}
	}
	if k > 0 {
		t.Errorf("%d ends failed; the first:\n%s", k, msgs.String())
	}
	t.Logf("closed in %v; OS threads after closing them all: %d", time.Since(start).Round(time.Millisecond), osThreads(t))
}
