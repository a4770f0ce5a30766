package rxe

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand"
)

// Every rdma_cm id of the process is on one event channel, whose reader
// hands each event to its id's mailbox: many connections set up and torn
// down at once on one listener must each get their own events. Each
// client's request data names it, and the server's accept answers with the
// same name; the addresses must pair up too. Half the connections are
// disconnected by the client, half closed by the server without a
// disconnect, all at once. Afterwards the process has the descriptors and
// goroutines it had before, and the kernel no rdma_cm id on the port.
func TestControlCMManyConcurrent(t *testing.T) {
	const n = 50
	// Warm up: librdmacm's devices and the process's channel are made by
	// the first connection and kept; what is counted is what a connection
	// leaves behind.
	{
		l := ctlListen(t)
		srv := ctlServe(t, l, func(*hand.ConnRequest) hand.ConnConfig { return hand.ConnConfig{} })
		c, err := hand.Dial(ctlContext(t, 20*time.Second), l.Addr().String(), hand.ConnConfig{})
		require.NoError(t, err)
		s := <-srv
		require.NotNil(t, s)
		require.NoError(t, c.Close())
		require.NoError(t, s.Close())
		require.NoError(t, l.Close())
	}
	fds, gs := openFDs(t), runtime.NumGoroutine()

	l, err := hand.Listen(ctlContext(t, 10*time.Second), fmt.Sprintf("%s:0", ctlAddr(t)))
	require.NoError(t, err)
	port := l.Addr().Port()
	ctx := ctlContext(t, 60*time.Second)

	type side struct {
		conn *hand.Conn
		err  error
	}
	servers := make(chan side, n)
	var accepting sync.WaitGroup
	accepting.Add(1)
	go func() {
		defer accepting.Done()
		for range n {
			req, err := l.Accept(ctx)
			if err != nil {
				servers <- side{err: err}
				return
			}
			go func() {
				// The accept's data answers with the request's name.
				name := bytes.TrimRight(req.PrivateData(), "\x00")
				c, err := req.Accept(ctx, hand.ConnConfig{PrivateData: append([]byte("re "), name...)})
				servers <- side{c, err}
			}()
		}
	}()
	clients := make([]*hand.Conn, n)
	var dialing sync.WaitGroup
	for i := range clients {
		dialing.Add(1)
		go func() {
			defer dialing.Done()
			c, err := hand.Dial(ctx, l.Addr().String(), hand.ConnConfig{PrivateData: []byte(fmt.Sprintf("client %d", i))})
			if err != nil {
				t.Errorf("Dial %d: %v", i, err)
				return
			}
			clients[i] = c
		}()
	}
	dialing.Wait()
	accepting.Wait()
	require.False(t, t.Failed())
	byName := map[string]*hand.Conn{}
	for range n {
		s := <-servers
		require.NoError(t, s.err)
		name := string(bytes.TrimRight(s.conn.PeerPrivateData(), "\x00"))
		require.NotContains(t, byName, name, "two connections with one request")
		byName[name] = s.conn
	}
	require.NoError(t, l.Close())
	for i, c := range clients {
		name := fmt.Sprintf("client %d", i)
		require.Equal(t, "re "+name, string(bytes.TrimRight(c.PeerPrivateData(), "\x00")), "connection %d got another's accept", i)
		s := byName[name]
		require.NotNil(t, s, name)
		require.Equal(t, c.LocalAddr(), s.RemoteAddr(), name)
	}

	// Teardown, all at once: even clients disconnect and the server
	// answers; for odd ones the server closes without a disconnect, and
	// the client's WaitDisconnect sees the peer go.
	var down sync.WaitGroup
	for i, c := range clients {
		s := byName[fmt.Sprintf("client %d", i)]
		down.Add(2)
		go func() {
			defer down.Done()
			var err error
			if i%2 == 0 {
				err = c.Disconnect(ctx)
			} else {
				err = c.WaitDisconnect(ctx)
			}
			if err == nil {
				err = c.Close()
			}
			if err != nil {
				t.Errorf("client %d: %v", i, err)
			}
		}()
		go func() {
			defer down.Done()
			var err error
			if i%2 == 0 {
				err = s.WaitDisconnect(ctx)
			}
			if cerr := s.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Errorf("server %d: %v", i, err)
			}
		}()
	}
	down.Wait()
	require.False(t, t.Failed())

	requireSettles(t, "open descriptors", fds, func() int { return openFDs(t) })
	requireSettles(t, "goroutines", gs, runtime.NumGoroutine)
	requireSettles(t, fmt.Sprintf("rdma_cm ids on port %d", port), 0, func() int { return cmIDsOnPort(t, port) })
}

// A Listener closed with requests that came and were not taken rejects
// them: their clients' Dials fail at once with ECONNREFUSED instead of
// waiting for the request to time out, and no id of theirs is left in the
// kernel. The request Accept returned is the caller's, unaffected.
func TestControlCMListenerCloseRejectsQueued(t *testing.T) {
	RequireDevice(t)
	l, err := hand.Listen(ctlContext(t, 10*time.Second), fmt.Sprintf("%s:0", ctlAddr(t)))
	require.NoError(t, err)
	port := l.Addr().Port()
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() {
			c, err := hand.Dial(ctlContext(t, 60*time.Second), l.Addr().String(), hand.ConnConfig{})
			if err == nil {
				c.Close()
			}
			errs <- err
		}()
	}
	taken, err := l.Accept(ctlContext(t, 20*time.Second))
	require.NoError(t, err)
	// The others' requests come within a few ms on rxe: wait until the
	// kernel has the clients' ids, the listener's and the taken request's,
	// then a little more.
	for deadline := time.Now().Add(5 * time.Second); cmIDsOnPort(t, port) < n+2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	t.Logf("rdma_cm ids on the port before Close: %d (the listener, %d clients' and the requests')", cmIDsOnPort(t, port), n)
	start := time.Now()
	require.NoError(t, l.Close())
	for range n - 1 {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
		case <-time.After(10 * time.Second):
			t.Fatalf("a queued request's Dial did not end %v after the Listener closed", time.Since(start))
		}
	}
	t.Logf("the queued requests' Dials failed within %v of Close", time.Since(start))
	require.NoError(t, taken.Reject(nil))
	require.ErrorIs(t, <-errs, syscall.ECONNREFUSED)
	requireSettles(t, fmt.Sprintf("rdma_cm ids on port %d", port), 0, func() int { return cmIDsOnPort(t, port) })
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// cmIDsOnPort counts the kernel's rdma_cm ids with port as source or
// destination port (rdma resource show cm_id).
func cmIDsOnPort(t *testing.T, port uint16) int {
	t.Helper()
	out, err := exec.Command("rdma", "resource", "show", "cm_id").CombinedOutput()
	require.NoError(t, err, "rdma resource show cm_id: %s", out)
	want := fmt.Sprintf(":%d ", port)
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line+" ", want) {
			n++
		}
	}
	return n
}

// requireSettles waits up to 10 s for get to return at most want
// (teardown ends in goroutines and the kernel a little after the calls
// return), then fails naming what. At most: what the test leaked comes on
// top of the count it started with, and a goroutine an earlier test left
// ending may end meanwhile.
func requireSettles(t *testing.T, what string, want int, get func() int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := get()
		if got <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want at most %d", what, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
