package rxe

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/internal/listenwait"
	"github.com/goverbs/goverbs/internal/pingpong"
	"github.com/goverbs/goverbs/internal/rping"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// Peers that lie. goverbs-rping's server (rping.Run) faces a scripted
// client that speaks rdma_cm and the fast paths correctly but sends what it
// should not. Each case names what it injects; each checks that the server
// fails with a clear error within its deadline (or, for a client that
// disconnects in the middle of a ping, ends cleanly, as rping does),
// released everything it made (the device's resource counts are back where
// they were), and left the client's memory as it was.

const badPeerSize = 64 // the server's -S

// badClient is the scripted peer: connected to the rping server, with a
// 4 KiB MR whose bytes are a known pattern, and chains to send with.
type badClient struct {
	conn *hand.Conn
	mr   *hand.MR
	sc   *hand.SendChain
	cp   *hand.Poller // on the Conn's CQ, which its sends and receives share
	recv int          // the server's messages received so far
}

// dialRping dials the server at port until it listens.
func dialRping(t *testing.T, ctx context.Context, port int) *badClient {
	t.Helper()
	addr := netip.AddrPortFrom(ctlAddr(t), uint16(port)).String()
	var conn *hand.Conn
	var err error
	for {
		if conn, err = hand.Dial(ctx, addr, hand.ConnConfig{Caps: hand.QPCaps{MaxSendWR: 4, MaxRecvWR: 4}}); err == nil {
			break
		}
		if ctx.Err() != nil || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dialing the rping server: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // not listening yet
	}
	c := &badClient{conn: conn}
	ctlCloseLater(t, conn)
	c.mr, err = conn.PD().Alloc(4096, hand.AccessLocalWrite|hand.AccessRemoteRead|hand.AccessRemoteWrite)
	require.NoError(t, err)
	ctlCloseLater(t, c.mr)
	for i := range c.mr.Bytes() {
		c.mr.Bytes()[i] = byte(i*7 + 3)
	}
	c.sc = testkit.SendChain(t, 1, 1)
	require.Same(t, conn.SendCQ(), conn.RecvCQ(), "the client's sends and receives complete on one CQ")
	c.cp, err = hand.NewPoller(conn.SendCQ(), 1)
	require.NoError(t, err)
	t.Cleanup(func() { c.cp.Close() })
	// Room for the server's "go ahead" messages, as rping's client keeps.
	rc := testkit.RecvChain(t, 2, 1)
	v := rc.Reserve(2)
	v.Set(0, 10, c.mr.SGE(3072, 16))
	v.Set(1, 11, c.mr.SGE(3088, 16))
	require.NoError(t, rc.PostRecv(conn.QP()))
	return c
}

// send sends n bytes at offset off of the client's MR and waits for the
// send's completion.
func (c *badClient) send(t *testing.T, ctx context.Context, off, n int) {
	t.Helper()
	c.sc.Reserve(1).SetSend(0, 1, hand.Signaled, c.mr.SGE(off, n))
	require.NoError(t, c.sc.PostSend(c.conn.QP()))
	c.next(t, ctx, hand.OpcodeSend)
}

// goAhead waits until the server's go-ahead for the advertisement sent last
// has arrived (the k-th message from the server, counting from 1): the
// server has then RDMA-read what that advertisement names and posted its
// answer, and waits for the next advertisement.
func (c *badClient) goAhead(t *testing.T, ctx context.Context, k int) {
	t.Helper()
	for c.recv < k {
		c.next(t, ctx, hand.OpcodeRecv)
	}
}

// next waits for the next completion of opcode op on the client's CQ,
// counting the receives it meets on the way.
func (c *badClient) next(t *testing.T, ctx context.Context, op verbs.WCOpcode) {
	t.Helper()
	for {
		wcs, err := c.cp.Wait(ctx)
		require.NoError(t, err, "the client waiting for a completion (%v)", op)
		wc := &wcs[0]
		require.True(t, wc.OK(), "the client's WR %d: %s", wc.WRID(), wc.StatusString())
		if wc.Opcode() == hand.OpcodeRecv {
			c.recv++
		}
		if wc.Opcode() == op {
			return
		}
	}
}

// advert writes rping's 16-byte advertisement at offset off of the MR.
func (c *badClient) advert(off int, addr uint64, rkey, n uint32) {
	b := c.mr.Bytes()[off : off+16]
	binary.BigEndian.PutUint64(b, addr)
	binary.BigEndian.PutUint32(b[8:], rkey)
	binary.BigEndian.PutUint32(b[12:], n)
}

func TestBadPeerRping(t *testing.T) {
	dev, _ := RequireDevice(t)
	// librdmacm opens every device once per process, on first use, and
	// keeps it: let that happen before the counts are taken.
	_, err := hand.CMContext(dev)
	require.NoError(t, err)
	addr := ctlAddr(t).String() // here: it fails the test through require
	for k, tc := range []struct {
		name   string
		inject func(t *testing.T, ctx context.Context, c *badClient)
		want   string // in the server's error; "" for none: a clean end
		says   string // in what the server printed to stderr
		// The server's deadline. A lie ends the server long before it,
		// after rdma_cm's setup and the client's moves (about 1 s on an
		// idle VM): 10 s, so that a loaded
		// VM does not end it at the deadline instead. A case that waits
		// for the deadline sets a shorter one.
		deadline time.Duration
	}{
		{
			name: "truncated advertisement (8 of 16 bytes)",
			inject: func(t *testing.T, ctx context.Context, c *badClient) {
				c.advert(1024, c.mr.Addr(), c.mr.RKey(), badPeerSize)
				c.send(t, ctx, 1024, 8)
			},
			want: "received bogus data, size 8",
		},
		{
			name: "advertised length beyond the server's buffer (65535 > -S 64)",
			inject: func(t *testing.T, ctx context.Context, c *badClient) {
				c.advert(1024, c.mr.Addr(), c.mr.RKey(), 65535)
				c.send(t, ctx, 1024, 16)
			},
			want: "the peer's buffer is 65535 bytes, more than the 64 of -S",
		},
		{
			name: "write-back buffer smaller than the text (4 bytes)",
			inject: func(t *testing.T, ctx context.Context, c *badClient) {
				copy(c.mr.Bytes(), "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr\x00")
				c.advert(1024, c.mr.Addr(), c.mr.RKey(), badPeerSize)
				c.send(t, ctx, 1024, 16)
				c.goAhead(t, ctx, 1) // the server has read the ping
				c.advert(1024, c.mr.Addr()+2048, c.mr.RKey(), 4)
				c.send(t, ctx, 1024, 16)
			},
			want: "too small for the",
		},
		{
			// Not a lie, but out of turn: the write-back advertisement
			// comes right behind the first, before the server's go-ahead,
			// so it lands in the receive the server re-posts for it. The
			// server must act on each in turn: read the text from the
			// first, write it back where the second says. (rxe's RNR
			// retry delivers the second well after the server has parsed
			// the first, so the server that parsed its receive buffer
			// after re-posting it passed this too, 3 runs of 3: the copy
			// closes that window by construction, not by this test.)
			name: "next advertisement sent before the go-ahead",
			inject: func(t *testing.T, ctx context.Context, c *badClient) {
				const text, back = "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ\x00", 3200
				copy(c.mr.Bytes(), text)
				c.advert(1024, c.mr.Addr(), c.mr.RKey(), badPeerSize)
				c.advert(1040, c.mr.Addr()+back, c.mr.RKey(), badPeerSize)
				c.sc.Reserve(1).SetSend(0, 1, 0, c.mr.SGE(1024, 16))
				require.NoError(t, c.sc.PostSend(c.conn.QP()))
				c.send(t, ctx, 1040, 16)
				echo := c.mr.Bytes()[back : back+len(text)]
				for end := time.Now().Add(4 * time.Second); string(echo) != text && time.Now().Before(end); {
					time.Sleep(10 * time.Millisecond)
				}
				require.Equal(t, text, string(echo), "the text echoed where the second advertisement says")
			},
			want: "context deadline exceeded", // then the client sends nothing more
			// The echo, waited for 4 s, must come first.
			deadline: 5 * time.Second,
		},
		{
			name:     "connects and never sends",
			inject:   func(t *testing.T, ctx context.Context, c *badClient) {},
			want:     "context deadline exceeded",
			deadline: 3 * time.Second,
		},
		{
			// Not a lie either: a client stopped in the middle of a
			// ping. rping's server returns 0 whenever the client has
			// disconnected, at whichever wait; goverbs-rping's did so
			// only between pings, and failed here with "wait for
			// RDMA_WRITE_ADV: context canceled".
			name: "disconnects after the read's go-ahead",
			inject: func(t *testing.T, ctx context.Context, c *badClient) {
				copy(c.mr.Bytes(), "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ\x00")
				c.advert(1024, c.mr.Addr(), c.mr.RKey(), badPeerSize)
				c.send(t, ctx, 1024, 16)
				// Only once the server has read the ping and said go
				// ahead: it then waits for RDMA_WRITE_ADV, the wait the
				// disconnect must end. (A 300 ms sleep stood here: with
				// none the disconnect met the server's RDMA read in 5
				// runs of 8, "wait for RDMA_READ_COMPLETE".)
				sent := time.Now()
				c.goAhead(t, ctx, 1)
				t.Logf("the server's go-ahead came %v after the advertisement", time.Since(sent).Round(time.Microsecond))
				require.NoError(t, c.conn.Disconnect(ctx))
			},
			says: "server DISCONNECT EVENT...\nthe client disconnected in the middle of a ping (wait for RDMA_WRITE_ADV)\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := testkit.ResourceCounts(t, dev)
			port := 7480 + k
			deadline := cmp.Or(tc.deadline, 10*time.Second)
			sctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			served := make(chan error, 1)
			start := time.Now()
			var stderr bytes.Buffer // read once served has said the server returned
			go func() {
				served <- rping.Run(sctx, rping.Config{Server: true, Addr: addr, Port: port, Size: badPeerSize},
					io.Discard, &stderr)
			}()
			cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer ccancel()
			var err error
			func() {
				c := dialRping(t, cctx, port)
				pristine := bytes.Clone(c.mr.Bytes())
				tc.inject(t, cctx, c)
				select {
				case err = <-served:
				case <-time.After(deadline + 5*time.Second):
					t.Fatalf("the server did not return within %v of its %v deadline", time.Since(start), deadline)
				}
				// The server wrote nothing into the client's memory: the
				// client's own bytes are what it put there itself.
				require.True(t, bytes.Equal(pristine[2048:3072], c.mr.Bytes()[2048:3072]), "the server wrote into the client's buffer")
				require.NoError(t, c.mr.Close())
				require.NoError(t, c.conn.Close())
			}()
			if tc.want == "" {
				require.NoError(t, err, "the server did not end cleanly")
			} else {
				require.Error(t, err, "the server accepted the lie")
				require.Contains(t, err.Error(), tc.want)
				require.False(t, strings.Contains(err.Error(), "closing"), "the server failed to release something: %v", err)
			}
			require.Contains(t, stderr.String(), tc.says)
			took := time.Since(start)
			require.Less(t, took, deadline+5*time.Second)
			// Everything the server made is gone (the client's too).
			waitCounts(t, dev, before)
			t.Logf("injected: %s; server: %v (after %v)", tc.name, err, took.Round(time.Millisecond))
		})
	}
}

// waitCounts waits (a few seconds at most: the kernel releases rdma_cm ids
// asynchronously) until the device's resource counts are want.
func waitCounts(t *testing.T, dev string, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := testkit.ResourceCounts(t, dev)
		same := len(got) == len(want)
		for k, v := range want {
			same = same && got[k] == v
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rdma resources %v after, %v before", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A peer that sends garbage instead of the ping-pong tools' address line.
// Injected: 52 bytes of text that is no "LID:QPN:PSN:GID" line, sent to
// goverbs-pingpong's server over its TCP side channel. Measured: the
// server ends at once with pingaddr's error naming the field, and every
// verbs object it made is released. (Nothing of the peer's memory is at
// stake: the line is refused before any QP leaves INIT.)
func TestBadPeerPingpongGarbageLine(t *testing.T) {
	dev, gidIndex := RequireDevice(t)
	before := testkit.ResourceCounts(t, dev)
	const port = 18540
	type result struct {
		err error
	}
	served := make(chan result, 1)
	start := time.Now()
	go func() {
		_, err := pingpong.Run(pingpong.Config{Port: port, Device: dev, IBPort: 1, Size: 4096, MTU: 1024, RxDepth: 16,
			Iters: 10, GIDIndex: gidIndex}, io.Discard)
		served <- result{err}
	}()
	var side net.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if side, err = net.Dial("tcp", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String()); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the pingpong server never listened: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
	defer side.Close()
	garbage := make([]byte, 52) // the size of the C tools' message
	copy(garbage, "this is not an address line, it is garbage!!!!!!!!!")
	_, err = side.Write(garbage)
	require.NoError(t, err)
	var r result
	select {
	case r = <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not give up on a garbage address line within 10 s")
	}
	require.Error(t, r.err)
	require.Contains(t, r.err.Error(), "pingaddr")
	waitCounts(t, dev, before)
	t.Logf("injected: %q; server: %v (after %v)", garbage[:20], r.err, time.Since(start).Round(time.Millisecond))
}

// A peer that tries to send more private data than the transport carries
// (the IB CM's REQ holds 56 bytes after rdma_cm's header). Injected: a raw
// librdmacm client (the generated layer, no hand) calls rdma_connect with
// 57 bytes, and hand.Dial is asked for 57 too. Measured: librdmacm refuses
// with EINVAL before anything goes on the wire, hand refuses before calling
// C, and the listener sees no request at all.
func TestBadPeerLongPrivateData(t *testing.T) {
	_, gidIndex := RequireDevice(t)
	l := ctlListen(t)
	_, id := cmResolved(t, l.Addr())
	e := cmEnv(t, id, gidIndex)
	cmQP(t, id, e, e.cq(t, 4), 4, 1)

	data := make([]byte, 57)
	var pin runtime.Pinner
	pin.Pin(&data[0])
	param := rdmacm.ConnParam{PrivateData: unsafe.Pointer(&data[0]), PrivateDataLen: uint8(len(data)), RetryCount: 7, RNRRetryCount: 7}
	err := rdmacm.Connect(id, &param)
	pin.Unpin()
	require.ErrorIs(t, err, syscall.EINVAL, "rdma_connect with 57 bytes of private data")

	_, err = hand.Dial(ctlContext(t, 5*time.Second), l.Addr().String(), hand.ConnConfig{PrivateData: data})
	var attr *hand.AttrError
	require.ErrorAs(t, err, &attr)

	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = l.Accept(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the listener got a request")
	t.Logf("injected: %d bytes of private data; librdmacm: rdma_connect refused (EINVAL); hand: %v; the listener saw nothing", len(data), attr)
}

// A goverbs-perf server whose client goes away in the middle of the timed
// loop. Injected: a scripted client that exchanges addresses (its own QPN,
// which has no QP behind it), passes the start sync, and closes the side
// channel, as a client that is killed or fails does. Measured: the server,
// which waits in its loop for messages that will never come, ends within
// seconds with an error that says the peer closed the side channel, in
// each way of waiting: busy-polling in Go, in C (-loop c) and in Go over
// the C loop's post and poll (-loop cgo, and with -e its wait in C), and for
// events on the thread and on the netpoller (-e); in send_bw, and in
// send_lat, whose server waits for the client's first message. Before the
// peer watch (perf/watch.go) it waited for ever: perftest's server gives
// up after 60 to 120 s with no message, the watch after as long, and at
// once when the side channel closes.
func TestBadPeerPerfClientGone(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	self, err := os.Executable()
	require.NoError(t, err)
	t.Setenv(perfChildEnv, "1")
	ctx, err := hand.Open(device)
	require.NoError(t, err)
	gid, err := ctx.QueryGID(1, gidIndex)
	ctx.Close()
	require.NoError(t, err)
	for k, c := range []struct {
		name string
		args []string
	}{
		{"send_bw", []string{"-t", "send_bw"}},
		{"send_bw, C loop", []string{"-t", "send_bw", "-loop", "c"}},
		{"send_bw, cgo loop", []string{"-t", "send_bw", "-loop", "cgo"}},
		{"send_bw, cgo loop, events", []string{"-t", "send_bw", "-loop", "cgo", "-e"}},
		{"send_bw, events on the thread", []string{"-t", "send_bw", "-e"}},
		{"send_bw, events on the netpoller", []string{"-t", "send_bw", "-e", "-wait", "netpoll"}},
		{"send_lat", []string{"-t", "send_lat"}},
		{"send_lat, events on the thread", []string{"-t", "send_lat", "-e"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := 18631 + k
			cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := append([]string{"-d", device, "-x", strconv.Itoa(gidIndex), "-s", "64", "-n", "1000", "-p", strconv.Itoa(port)}, c.args...)
			srv := tooltest.StartC(t, cctx, "Go server", self, args...)
			require.NoError(t, listenwait.TCP(cctx, port), "the goverbs-perf server never listened")
			side, err := net.Dial("tcp", net.JoinHostPort(localAddr(), strconv.Itoa(port)))
			require.NoError(t, err)
			defer side.Close()
			theirs := make([]byte, hand.EndpointSize+12) // perf's peer: endpoint, buffer address, rkey
			_, err = io.ReadFull(side, theirs)
			require.NoError(t, err, "the server's address")
			ours, err := hand.Endpoint{QPN: 0x123, PSN: 1, GID: gid}.MarshalBinary()
			require.NoError(t, err)
			ours = binary.BigEndian.AppendUint64(ours, 0x10000)
			ours = binary.BigEndian.AppendUint32(ours, 0x1234)
			_, err = side.Write(ours)
			require.NoError(t, err)
			b := []byte{1}
			_, err = side.Write(b)
			require.NoError(t, err)
			_, err = io.ReadFull(side, b)
			require.NoError(t, err, "the server's start sync")
			time.Sleep(300 * time.Millisecond) // the server is in its loop
			start := time.Now()
			side.Close()
			r := srv.Wait()
			took := time.Since(start)
			t.Logf("server, %v after the client closed:\n%s", took.Round(time.Millisecond), r.Out)
			require.Less(t, took, 10*time.Second, "the server outlived its client by %v", took)
			require.Equal(t, 1, r.ExitCode, "the server's exit status")
			require.Contains(t, r.Out, "goverbs-perf: the peer closed the side channel before the end sync")
			require.Contains(t, r.Out, "; the watch ended the timed loop: ")
		})
	}
}
