package rxe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/rsocket"
	"github.com/goverbs/goverbs/tests/internal/testkit"
)

// rsocket peers that lie. A scripted peer on hand speaks rsocket's wire
// protocol (rsocket_peer_test.go encodes it independently of the
// package's own encoder) and sends, on soft-RoCE, what a peer must not:
// truncated connection data, a buffer advertisement beyond what it
// declared, data longer than the space it was given, data messages past
// its credits. Each case checks that the rsocket side's call fails with an
// error naming the field, that nothing was written outside the peer's
// declared buffer, that the failed Conn closes without hanging, that a
// second connection of the same process, opened before, still echoes
// after, and that goroutines, file descriptors and the device's objects
// come back to where they were.

// The bad peer's MR: its target list (2 entries) at 0, the bytes it writes
// from at peerSrc, the receive buffer it declares at peerBuf (2*half
// bytes), and undeclared bytes after it, registered for remote write under
// the same key: what a check that lets a write through would reach.
const (
	peerSrc    = 64
	peerBuf    = 4096
	peerMRSize = 16384
)

type rsPeer struct {
	conn    *hand.Conn
	mr      *hand.MR
	other   *hand.MR // registered for remote write, declared nowhere
	sc      *hand.SendChain
	cp      *hand.Poller
	half    uint32     // data_buf.length declared
	credits uint16     // declared
	theirs  rsConnData // the rsocket side's
	imms    []uint32   // immediate data received, in order
	sends   int        // send completions
}

// dialRsPeer connects a scripted peer to the rsocket listener at addr with
// valid connection data: credits, and a data buffer of half bytes at
// peerBuf of its MR.
func dialRsPeer(t *testing.T, ctx context.Context, addr string, credits uint16, half uint32) *rsPeer {
	t.Helper()
	p := &rsPeer{half: half, credits: credits}
	rc := testkit.RecvChain(t, 32, 1)
	cfg := rsPeerConfig(rc, 32, []int{peerMRSize, 4096}, func(mrs []*hand.MR) rsConnData {
		p.mr, p.other = mrs[0], mrs[1]
		for i := range p.mr.Bytes() {
			p.mr.Bytes()[i] = byte(i*7 + 3)
		}
		clear(p.mr.Bytes()[:32]) // the target list: nothing advertised yet
		for i := range p.other.Bytes() {
			p.other.Bytes()[i] = byte(i*5 + 1)
		}
		return rsConnData{version: 1, flags: rsFlags(), credits: credits,
			tgtAddr: p.mr.Addr(), tgtKey: p.mr.RKey(), tgtLen: 2,
			bufAddr: p.mr.Addr() + peerBuf, bufKey: p.mr.RKey(), bufLen: half}
	})
	var err error
	p.conn, err = hand.Dial(ctx, addr, cfg)
	require.NoError(t, err, "the bad peer dialling %s", addr)
	// Closed by the test, and here when it fails first (last registered
	// first: the MRs before the Conn whose PD they are on).
	t.Cleanup(func() { p.conn.Close() })
	t.Cleanup(func() { p.mr.Close(); p.other.Close() })
	p.theirs = parseRsConnData(t, p.conn.PeerPrivateData())
	require.Same(t, p.conn.SendCQ(), p.conn.RecvCQ())
	p.cp, err = hand.NewPoller(p.conn.SendCQ(), 8)
	require.NoError(t, err)
	t.Cleanup(func() { p.cp.Close() })
	p.sc = testkit.SendChain(t, 1, 1)
	return p
}

// poll takes one batch of completions: receives' immediate data, sends.
func (p *rsPeer) poll(t *testing.T, ctx context.Context) {
	t.Helper()
	wcs, err := p.cp.Wait(ctx)
	require.NoError(t, err, "the bad peer waiting for a completion")
	for i := range wcs {
		wc := &wcs[i]
		require.True(t, wc.OK(), "the bad peer's WR %#x: %s", wc.WRID(), wc.StatusString())
		if wc.IsRecv() {
			imm, ok := wc.Imm()
			require.True(t, ok, "a receive without immediate data")
			p.imms = append(p.imms, imm)
		} else {
			p.sends++
		}
	}
}

// waitImm waits until immediate data imm has arrived.
func (p *rsPeer) waitImm(t *testing.T, ctx context.Context, pred func(uint32) bool) {
	t.Helper()
	for {
		for _, imm := range p.imms {
			if pred(imm) {
				return
			}
		}
		p.poll(t, ctx)
	}
}

// writeImm writes n bytes at off of the MR to raddr under rkey with
// immediate data imm, and waits until the write is acknowledged.
func (p *rsPeer) writeImm(t *testing.T, ctx context.Context, off, n int, raddr uint64, rkey, imm uint32) {
	t.Helper()
	v := p.sc.Reserve(1)
	v.SetWriteImm(0, 1, hand.Signaled, imm, p.mr.SGE(off, n), raddr, rkey)
	if n == 0 {
		v.WR(0).NumSGE = 0
	}
	require.NoError(t, p.sc.PostSend(p.conn.QP()))
	for want := p.sends + 1; p.sends < want; {
		p.poll(t, ctx)
	}
}

// advertise writes sge into entry 1 of the rsocket side's target list
// (entry 0 is the buffer of the connection data), in this host's byte
// order, as it declared, with new credits (none of its messages read).
func (p *rsPeer) advertise(t *testing.T, ctx context.Context, addr uint64, key, length uint32) {
	t.Helper()
	b := p.mr.Bytes()[peerSrc : peerSrc+16]
	binary.NativeEndian.PutUint64(b, addr)
	binary.NativeEndian.PutUint32(b[8:], key)
	binary.NativeEndian.PutUint32(b[12:], length)
	p.writeImm(t, ctx, peerSrc, 16, p.theirs.tgtAddr+16, p.theirs.tgtKey, rsImm(rsOpSGL, uint32(p.credits)))
}

// rsBadPeerBase takes the process's baseline once what lives as long as
// the process is there: librdmacm's device contexts (opened on first use)
// and hand's rdma_cm event channel and its reader (made by the first id).
func rsBadPeerBase(t *testing.T) (string, closeBase) {
	dev, _ := RequireDevice(t)
	_, err := hand.CMContext(dev)
	require.NoError(t, err)
	l, err := hand.Listen(context.Background(), netip.AddrPortFrom(ctlAddr(t), 0).String())
	require.NoError(t, err)
	require.NoError(t, l.Close())
	return dev, closeBaseline(t, dev)
}

// closeBounded closes c, failing the test unless Close returns within 10 s.
func closeBounded(t *testing.T, what string, c io.Closer) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		t.Logf("%s: Close: %v", what, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Close did not return within 10 s", what)
	}
}

// A peer that lies once connected. Injected, against an rsocket Listener's
// accepted Conn: a buffer advertisement straddling the end of the receive
// buffer the peer declared, one under the key of another of its MRs, a data
// message whose immediate claims one byte more than was advertised (and
// 2^29-1 bytes), credits past those the side declared, an unknown control
// code, 17 data messages to a side that gave 16 credits. Measured:
// the Conn's Write or Read fails with the error naming the field, the
// bytes before the lie arrive intact, the peer's memory outside its
// declared buffer is as it was, and the rest as the file's comment says.
func TestRsocketBadPeerConnected(t *testing.T) {
	for _, tc := range []struct {
		name    string
		credits uint16 // the peer's
		half    uint32 // the peer's data_buf.length
		queue   int    // the rsocket side's QueueSize (0: 384)
		run     func(t *testing.T, ctx context.Context, p *rsPeer, s *rsocket.Conn) string
	}{
		{
			name: "advertisement past the end of the declared buffer", credits: 32, half: 2048,
			run: func(t *testing.T, ctx context.Context, p *rsPeer, s *rsocket.Conn) string {
				// The declared buffer is [peerBuf, peerBuf+4096); this
				// one starts 1 KiB before its end and runs 1 KiB past.
				p.advertise(t, ctx, p.mr.Addr()+peerBuf+2*uint64(p.half)-1024, p.mr.RKey(), 2048)
				data := pattern(8192, 1)
				s.SetWriteDeadline(time.Now().Add(10 * time.Second))
				n, err := s.Write(data)
				require.Error(t, err, "Write took an advertisement outside the declared buffer")
				require.Equal(t, int(p.half), n, "the bytes written: the buffer of the connection data, then nothing")
				require.False(t, errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, context.DeadlineExceeded), "%v", err)
				p.waitImm(t, ctx, func(imm uint32) bool { return imm == rsImm(rsOpData, p.half) })
				require.True(t, bytes.Equal(data[:p.half], p.mr.Bytes()[peerBuf:peerBuf+p.half]), "the bytes before the lie")
				require.Contains(t, err.Error(), "buffer advertisement: addr: ")
				require.Contains(t, err.Error(), "is not within the peer's receive buffer")
				return err.Error()
			},
		},
		{
			name: "advertisement under another MR's key", credits: 32, half: 2048,
			run: func(t *testing.T, ctx context.Context, p *rsPeer, s *rsocket.Conn) string {
				p.advertise(t, ctx, p.other.Addr(), p.other.RKey(), 2048)
				s.SetWriteDeadline(time.Now().Add(10 * time.Second))
				n, err := s.Write(pattern(8192, 2))
				require.Error(t, err, "Write took an advertisement under another key")
				require.Equal(t, int(p.half), n)
				require.Contains(t, err.Error(), fmt.Sprintf("buffer advertisement: key: %#x, but the peer's receive buffer has key %#x", p.other.RKey(), p.mr.RKey()))
				return err.Error()
			},
		},
		{
			name: "data one byte longer than advertised", credits: 32, half: 2048,
			run: func(t *testing.T, ctx context.Context, p *rsPeer, s *rsocket.Conn) string {
				return overlong(t, ctx, p, s, 1)
			},
		},
		{
			name: "data of 2^29-1 bytes", credits: 32, half: 2048,
			run: func(t *testing.T, ctx context.Context, p *rsPeer, s *rsocket.Conn) string {
				return overlong(t, ctx, p, s, 0)
			},
		},
		{
			name: "credits one past those declared", credits: 32, half: 2048,
			run: func(t *testing.T, ctx context.Context, p *rsPeer, s *rsocket.Conn) string {
				// None of the rsocket side's messages sent yet: the peer
				// may return at most its 32 declared credits.
				return badImm(t, ctx, p, s, rsImm(rsOpSGL, 33), "immediate data: credits: sequence 33 is 33 past the 0 messages sent, more than the 32 receives the peer declared")
			},
		},
		{
			name: "control code 3", credits: 32, half: 2048,
			run: func(t *testing.T, ctx context.Context, p *rsPeer, s *rsocket.Conn) string {
				return badImm(t, ctx, p, s, rsImm(rsOpCtrl, 3), "immediate data: control: unknown control code 3")
			},
		},
		{
			name: "17 data messages for 16 credits", credits: 32, half: 1024, queue: 16,
			run: func(t *testing.T, ctx context.Context, p *rsPeer, s *rsocket.Conn) string {
				// A Write blocked for want of room (the peer advertised
				// 1024 bytes and no more) ends when the connection fails:
				// Read is not called before, so that no message is read
				// (and its credit returned) before the 17th arrives.
				werr := make(chan error, 1)
				s.SetWriteDeadline(time.Now().Add(20 * time.Second))
				go func() {
					_, err := s.Write(make([]byte, 4096))
					werr <- err
				}()
				for i := range 17 {
					p.mr.Bytes()[peerSrc] = byte('a' + i)
					p.writeImm(t, ctx, peerSrc, 1, p.theirs.bufAddr+uint64(i), p.theirs.bufKey, rsImm(rsOpData, 1))
				}
				err := <-werr
				require.Error(t, err, "the 17th message was taken")
				require.Contains(t, err.Error(), "immediate data: credits: a data message past the 16 credits given")
				// The 16 messages within the credits are read, then the
				// error.
				s.SetReadDeadline(time.Now().Add(10 * time.Second))
				var got []byte
				buf := make([]byte, 64)
				for {
					n, rerr := s.Read(buf)
					got = append(got, buf[:n]...)
					if rerr != nil {
						require.Equal(t, err.Error(), rerr.Error(), "Read's error")
						break
					}
				}
				require.Equal(t, "abcdefghijklmnop", string(got))
				return err.Error()
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, base := rsBadPeerBase(t)
			start := time.Now()
			a, b := rsocketPairTB(t, rsocket.Config{})
			rsEcho(t, "the good connection, before", a, b, 10)

			lc := rsocket.ListenConfig{Config: rsocket.Config{QueueSize: tc.queue}}
			l, err := lc.Listen(context.Background(), "tcp", netip.AddrPortFrom(ctlAddr(t), 0).String())
			require.NoError(t, err)
			accepted := make(chan *rsocket.Conn, 1)
			go func() {
				c, err := l.AcceptConn()
				if err != nil {
					t.Errorf("Accept: %v", err)
				}
				accepted <- c
			}()
			ctx := ctlContext(t, 30*time.Second)
			p := dialRsPeer(t, ctx, l.Addr().String(), tc.credits, tc.half)
			s := <-accepted
			require.NotNil(t, s)
			require.NoError(t, l.Close())
			// The rsocket side advertises the second half of its buffer
			// at once: after it, every byte of its buffer is the peer's
			// to write, and no more.
			p.waitImm(t, ctx, func(imm uint32) bool { return imm>>29 == rsOpSGL })
			pristine := bytes.Clone(p.mr.Bytes()[peerBuf+2*p.half:])
			pristineOther := bytes.Clone(p.other.Bytes())

			said := tc.run(t, ctx, p, s)

			require.True(t, bytes.Equal(pristine, p.mr.Bytes()[peerBuf+2*p.half:]), "written past the peer's declared buffer")
			require.True(t, bytes.Equal(pristineOther, p.other.Bytes()), "written into the peer's other MR")
			rsEcho(t, "the good connection, after", a, b, 11) // the process keeps its other connections
			closeBounded(t, "the failed Conn", s)
			// Its Close ends the connection on the wire too: the peer
			// sees rdma_cm's disconnect.
			require.NoError(t, p.conn.WaitDisconnect(ctx), "the bad peer waiting for the disconnect")
			closeBounded(t, "the good client", a)
			closeBounded(t, "the good server", b)
			require.NoError(t, p.mr.Close())
			require.NoError(t, p.other.Close())
			require.NoError(t, p.cp.Close())
			require.NoError(t, p.conn.Close())
			closeCheckBaseline(t, dev, base, "after the bad peer")
			t.Logf("error: %s (case took %v)", said, time.Since(start).Round(time.Millisecond))
		})
	}
}

// badImm makes the peer send a message of no bytes with immediate data imm,
// and checks that Read fails saying want.
func badImm(t *testing.T, ctx context.Context, p *rsPeer, s *rsocket.Conn, imm uint32, want string) string {
	t.Helper()
	p.writeImm(t, ctx, peerSrc, 0, p.theirs.bufAddr, p.theirs.bufKey, imm)
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := s.Read(make([]byte, 64))
	require.Error(t, err, "Read took immediate data %#x", imm)
	require.Zero(t, n)
	require.Contains(t, err.Error(), want)
	return err.Error()
}

// overlong makes the peer send a data message claiming the room the rsocket
// side advertised plus extra bytes (extra 0: 2^29-1 bytes, the most the
// immediate carries), and checks that Read fails naming its length.
func overlong(t *testing.T, ctx context.Context, p *rsPeer, s *rsocket.Conn, extra uint32) string {
	t.Helper()
	room := 2 * p.theirs.bufLen // both halves advertised
	claim := room + extra
	if extra == 0 {
		claim = 1<<29 - 1
	}
	// 16 real bytes at the start of the buffer: the write itself is
	// within it, its immediate lies.
	copy(p.mr.Bytes()[peerSrc:], "sixteen bytes!!!")
	p.writeImm(t, ctx, peerSrc, 16, p.theirs.bufAddr, p.theirs.bufKey, rsImm(rsOpData, claim))
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := s.Read(make([]byte, 64))
	require.Error(t, err, "Read took a data message longer than advertised")
	require.Zero(t, n)
	require.Contains(t, err.Error(), fmt.Sprintf("immediate data: length: %d bytes, but %d were advertised and not yet written", claim, room))
	return err.Error()
}

// A peer whose connection data is truncated or of another version.
// Injected: a hand client whose request carries 20 bytes of valid
// connection data (rdma_cm pads the rest with zeros: the target list's
// length reads 0), then one of version 2; a hand server whose accept
// carries the same to an rsocket Dial. Measured: the Listener refuses
// each request, OnRefused names the field, and its Accept, still waiting,
// takes a good Dial after; the Dial fails naming the field; a good
// connection opened before echoes after; everything comes back.
func TestRsocketBadPeerConnData(t *testing.T) {
	dev, base := rsBadPeerBase(t)
	a, b := rsocketPairTB(t, rsocket.Config{})
	rsEcho(t, "the good connection, before", a, b, 20)
	good := rsConnData{version: 1, flags: rsFlags(), credits: 16, tgtAddr: 0x10000, tgtKey: 1, tgtLen: 2,
		bufAddr: 0x20000, bufKey: 1, bufLen: 4096}
	badVersion := good
	badVersion.version = 2
	bad := []struct {
		name string
		data []byte
		want string
	}{
		{"20 bytes", good.bytes()[:20], "connection data: target_sgl.length: 0 entries, want 1 to 256"},
		{"version 2", badVersion.bytes(), "connection data: version: 2, want 1"},
	}

	t.Run("request", func(t *testing.T) {
		refused := make(chan error, len(bad))
		lc := rsocket.ListenConfig{OnRefused: func(_ net.Addr, err error) { refused <- err }}
		l, err := lc.Listen(context.Background(), "tcp", netip.AddrPortFrom(ctlAddr(t), 0).String())
		require.NoError(t, err)
		defer l.Close()
		accepted := make(chan *rsocket.Conn, 1)
		go func() {
			c, err := l.AcceptConn() // one call, through the refusals
			if err != nil {
				t.Errorf("Accept: %v", err)
			}
			accepted <- c
		}()
		for _, tc := range bad {
			_, err := hand.Dial(ctlContext(t, 10*time.Second), l.Addr().String(), hand.ConnConfig{PrivateData: tc.data})
			require.ErrorIs(t, err, syscall.ECONNREFUSED, "%s: the bad peer's dial", tc.name)
			select {
			case err := <-refused:
				require.ErrorContains(t, err, tc.want, tc.name)
				t.Logf("%s: refused: %v", tc.name, err)
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: OnRefused not called", tc.name)
			}
		}
		c, err := rsocket.Dial("tcp", l.Addr().String())
		require.NoError(t, err, "a good Dial after the bad ones")
		s := <-accepted
		require.NotNil(t, s)
		rsEcho(t, "the good Dial after the bad ones", c, s, 21)
		closeBounded(t, "the good client", c)
		closeBounded(t, "the accepted Conn", s)
	})

	t.Run("reply", func(t *testing.T) {
		hl := ctlListen(t)
		for _, tc := range bad {
			served := make(chan error, 1)
			go func() {
				ctx := ctlContext(t, 10*time.Second)
				req, err := hl.Accept(ctx)
				if err != nil {
					served <- err
					return
				}
				if d := req.PrivateData(); len(d) < 40 || d[0] != 1 {
					req.Reject(nil)
					served <- fmt.Errorf("not rsocket's connection data: % x", d)
					return
				}
				h, err := req.Accept(ctx, hand.ConnConfig{PrivateData: tc.data})
				if err != nil {
					served <- err
					return
				}
				// The dialler goes away: rdma_cm's disconnect.
				err = h.WaitDisconnect(ctx)
				served <- errors.Join(err, h.Close())
			}()
			c, err := rsocket.Dial("tcp", hl.Addr().String())
			if err == nil {
				c.Close()
			}
			require.Error(t, err, "%s: Dial took the reply", tc.name)
			require.Contains(t, err.Error(), tc.want, tc.name)
			require.NoError(t, <-served, "%s: the bad server", tc.name)
			t.Logf("%s: Dial: %v", tc.name, err)
		}
	})

	rsEcho(t, "the good connection, after", a, b, 22)
	closeBounded(t, "the good client", a)
	closeBounded(t, "the good server", b)
	closeCheckBaseline(t, dev, base, "after the bad peers")
}
