package rxe

// rsocket's keepalive on rxe0: a peer that goes silent (its QP moved to
// RESET behind rdma_cm's back: rxe drops whatever comes for it, answering
// nothing, as a host that lost power) fails a blocked Read with ETIMEDOUT
// within the documented bound while another connection of the process
// goes on; an idle healthy connection probes and stays up; and a probing
// Go client idles against rstream without disturbing it.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/internal/listenwait"
	"github.com/goverbs/goverbs/rsocket"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// silentPeer is an rsocket server written on hand, which answers at the
// transport level (its receives posted, its buffers registered) until
// silence moves its QP to RESET.
type silentPeer struct {
	l        *hand.Listener
	h        *hand.Conn
	tgt, buf *hand.MR
	rc       *hand.RecvChain
}

const (
	silentCredits = 16
	silentBuf     = 8192 // the receive buffer; its first half goes in the connection data
)

// listenSilent listens on the device's address; accept takes one client.
func listenSilent(t *testing.T) *silentPeer {
	t.Helper()
	l, err := hand.Listen(context.Background(), net.JoinHostPort(localAddr(), "0"))
	if err != nil {
		t.Fatalf("hand.Listen: %v", err)
	}
	p := &silentPeer{l: l, rc: testkit.RecvChain(t, silentCredits+4, 1)}
	t.Cleanup(p.close)
	return p
}

func (p *silentPeer) addr() string { return p.l.Addr().String() }

// accept accepts the next request, its QP made by rsPeerConfig.
func (p *silentPeer) accept(ctx context.Context) error {
	req, err := p.l.Accept(ctx)
	if err != nil {
		return err
	}
	if len(req.PrivateData()) < 40 || req.PrivateData()[0] != 1 {
		req.Reject(nil)
		return errors.New("the request carries no rsocket connection data")
	}
	cfg := rsPeerConfig(p.rc, silentCredits+4, []int{32, silentBuf}, func(mrs []*hand.MR) rsConnData {
		p.tgt, p.buf = mrs[0], mrs[1]
		// A target list of 2 entries; the first half of the receive buffer.
		return rsConnData{version: 1, flags: rsFlags(), credits: silentCredits,
			tgtAddr: p.tgt.Addr(), tgtKey: p.tgt.RKey(), tgtLen: 2,
			bufAddr: p.buf.Addr(), bufKey: p.buf.RKey(), bufLen: silentBuf / 2}
	})
	h, err := req.Accept(ctx, cfg)
	if err != nil {
		return err
	}
	p.h = h
	return nil
}

// waitData waits until a data message (immediate op 0) of the client's
// has come, which shows the connection works at the rsocket level.
func (p *silentPeer) waitData(ctx context.Context) error {
	poller, err := hand.NewPoller(p.h.RecvCQ(), 8)
	if err != nil {
		return err
	}
	defer poller.Close()
	for {
		wcs, err := poller.Wait(ctx)
		if err != nil {
			return err
		}
		for i := range wcs {
			wc := &wcs[i]
			if !wc.OK() {
				return errors.New("silent peer's completion: " + wc.StatusString())
			}
			if imm, ok := wc.Imm(); ok && wc.IsRecv() && imm>>29 == 0 {
				return nil
			}
		}
	}
}

// ackTimeout is the QP's local ACK timeout rdma_cm chose (the path's: the
// client's QP has the same).
func (p *silentPeer) ackTimeout(t *testing.T) time.Duration {
	t.Helper()
	attr, _, err := p.h.QP().Query()
	if err != nil {
		t.Fatalf("query the silent peer's QP: %v", err)
	}
	d := time.Duration(4096 * (uint64(1) << attr.Timeout)) // 4.096 us * 2^timeout, in ns
	t.Logf("rdma_cm's local ACK timeout on this path: %d (%v), retry count %d", attr.Timeout, d, attr.RetryCnt)
	return d
}

// silence moves the QP to RESET: rxe drops every packet for a QP below
// RTR without an answer (rxe_recv.c), and no rdma_cm message goes out.
func (p *silentPeer) silence(t *testing.T) {
	t.Helper()
	if err := p.h.QP().ToReset(); err != nil {
		t.Fatalf("silent peer to RESET: %v", err)
	}
}

// close closes what accept made, MRs before the Conn whose PD they are on.
func (p *silentPeer) close() {
	for _, mr := range []*hand.MR{p.tgt, p.buf} {
		if mr != nil {
			mr.Close()
		}
	}
	if p.h != nil {
		p.h.Close()
	}
	p.l.Close()
}

// A peer that goes silent without a disconnect fails a blocked Read, and
// a Write blocked behind unacknowledged messages, with an error matching
// syscall.ETIMEDOUT that says the peer stopped answering, within
// 2*KeepAlive + one local ACK timeout, the bound Config.KeepAlive
// documents (rxe retries forever with rsocket's retry count of 7, so the
// transport never ends it); a later Write fails at once with the same
// error; another connection of the process goes on working.
func TestRsocketKeepAliveSilentPeer(t *testing.T) {
	RequireDevice(t)
	const keepAlive = 100 * time.Millisecond
	good, goodSrv := rsocketPairTB(t, rsocket.Config{KeepAlive: 50 * time.Millisecond})
	rsEcho(t, "the good pair, before", good, goodSrv, 1)

	p := listenSilent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() { accepted <- p.accept(ctx) }()
	d := rsocket.Dialer{Timeout: 10 * time.Second, Config: rsocket.Config{KeepAlive: keepAlive}}
	c, err := d.DialContext(ctx, "tcp", p.addr())
	if err != nil {
		t.Fatalf("Dial the silent peer: %v", err)
	}
	defer c.Close()
	if err := <-accepted; err != nil {
		t.Fatalf("the silent peer's accept: %v", err)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("Write to the peer: %v", err)
	}
	if err := p.waitData(ctx); err != nil {
		t.Fatalf("the peer waiting for the data message: %v", err)
	}
	ack := p.ackTimeout(t)
	// Idle through a few probes, which the peer's transport acknowledges;
	// the connection is still up after them.
	time.Sleep(4 * keepAlive)
	if _, err := c.Write([]byte("z")); err != nil {
		t.Fatalf("Write after idling with probes: %v", err)
	}
	if err := p.waitData(ctx); err != nil {
		t.Fatalf("the peer waiting for the second data message: %v", err)
	}
	p.silence(t)

	start := time.Now()
	type res struct {
		n   int
		err error
	}
	rd, wr := make(chan res, 1), make(chan res, 1)
	go func() {
		n, err := c.Read(make([]byte, 10))
		rd <- res{n, err}
	}()
	// A Write at the same time: its first messages go out (the buffer
	// the peer advertised has room for them) and are never acknowledged,
	// the probe waits behind them, and the Write blocks for room.
	go func() {
		n, err := c.Write(make([]byte, 2*silentBuf))
		wr <- res{n, err}
	}()
	bound := 2*keepAlive + ack
	var r res
	select {
	case r = <-rd:
	case <-time.After(2*bound + 5*time.Second):
		t.Fatalf("Read still blocked %v after the peer went silent (documented bound %v)", time.Since(start), bound)
	}
	took := time.Since(start)
	t.Logf("the blocked Read ended %v after the peer went silent (bound 2*KeepAlive + ACK timeout = %v): %v", took, bound, r.err)
	if r.n != 0 || !errors.Is(r.err, syscall.ETIMEDOUT) {
		t.Fatalf("Read = %d, %v; want 0 and an error matching ETIMEDOUT", r.n, r.err)
	}
	if ne, ok := r.err.(net.Error); !ok || ne.Timeout() {
		t.Errorf("the error %v: a net.Error whose Timeout reports true, or none; want false: it is no deadline", r.err)
	}
	for _, want := range []string{"peer stopped answering", "keepalive probe"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("the error %q does not say %q", r.err, want)
		}
	}
	// Timers' slack on a loaded, emulated guest.
	if slack := time.Second; took > bound+slack {
		t.Errorf("Read ended %v after the peer went silent: past the bound (%v) by more than %v", took, bound, slack)
	}
	select {
	case w := <-wr:
		if took := time.Since(start); w.n >= 2*silentBuf || !errors.Is(w.err, syscall.ETIMEDOUT) || took > bound+time.Second {
			t.Errorf("the blocked Write: %d bytes, %v after %v; want fewer than %d bytes and the ETIMEDOUT error within %v", w.n, w.err, took, 2*silentBuf, bound+time.Second)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the Write still blocked %v after the Read ended", time.Since(start)-took)
	}
	if _, err := c.Write([]byte("y")); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("Write after the failure: %v, want the ETIMEDOUT error", err)
	}
	rsEcho(t, "the good pair, after", good, goodSrv, 2)
}

// hwCounter reads one of the rxe device's port counters.
func hwCounter(t *testing.T, dev, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", dev, "ports/1/hw_counters", name))
	if err != nil {
		t.Fatalf("rxe counter: %v", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("rxe counter %s: %v", name, err)
	}
	return n
}

// An idle pair with a short KeepAlive probes (the device's sent packets
// grow while nothing is written; an idle pair without keepalive sends
// none) and stays up: data goes both ways after many intervals.
func TestRsocketKeepAliveIdle(t *testing.T) {
	dev, _ := RequireDevice(t)
	const keepAlive, idle = 20 * time.Millisecond, 300 * time.Millisecond
	sent := func(what string, cfg rsocket.Config) int64 {
		c, s := rsocketPairTB(t, cfg)
		rsEcho(t, what+", before", c, s, 3)
		time.Sleep(keepAlive) // the echo's completions are reaped
		before := hwCounter(t, dev, "sent_pkts")
		time.Sleep(idle)
		n := hwCounter(t, dev, "sent_pkts") - before
		rsEcho(t, what+", after", c, s, 4)
		t.Logf("%s: %d packets sent on %s over %v idle", what, n, dev, idle)
		return n
	}
	off := sent("KeepAlive -1", rsocket.Config{KeepAlive: -1})
	on := sent("KeepAlive 20ms", rsocket.Config{KeepAlive: keepAlive})
	// Each side probes about idle/keepAlive times, a probe and its ACK
	// two packets: about 60; ask for a sixth of that.
	if want := off + int64(idle/keepAlive)*2*2/6; on < want {
		t.Errorf("%d packets sent over %v idle with KeepAlive %v, %d without: want at least %d", on, idle, keepAlive, off, want)
	}
}

// A Go client with a short KeepAlive idles between rounds against
// rstream's server (-T b, verifying, and its own keepalive on, -k 1):
// neither side's probes disturb the other, and rstream ends cleanly.
// (Whether rstream's probes went is not seen: they complete nothing on
// this side.)
func TestInteropRstreamKeepAlive(t *testing.T) {
	RequireDevice(t)
	addr := localAddr()
	port := 18790
	const size, pause = 64, 400 * time.Millisecond
	iters := 4 // 1.6 s idle: rstream's own probes (1 s) have time to go
	if testing.Short() {
		iters = 2 // the release matrix
	}
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	args := []string{"-b", addr, "-p", strconv.Itoa(port), "-S", strconv.Itoa(size), "-C", "1", "-I", strconv.Itoa(iters), "-T", "v", "-T", "b", "-k", "1"}
	srv := tooltest.StartC(t, ctx, "rstream server", "rstream", args...)
	if err := listenwait.CM(ctx, port); err != nil {
		cancel()
		t.Fatalf("rstream server: %v; output:\n%s", err, srv.Wait().Out)
	}
	d := rsocket.Dialer{Timeout: 10 * time.Second, Config: rsocket.Config{KeepAlive: 20 * time.Millisecond}}
	c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(port)).String())
	if err != nil {
		cancel()
		t.Fatalf("dial rstream's server: %v; its output:\n%s", err, srv.Wait().Out)
	}
	c.SetDeadline(time.Now().Add(interopTimeout))
	var out, in counter
	var got int64
	buf := make([]byte, size)
	round := func(n int) error {
		out.fill(buf[:n])
		if _, err := c.Write(buf[:n]); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return err
		}
		err := in.check(buf[:n], got)
		got += int64(n)
		return err
	}
	err = round(16)
	for i := 0; i < iters && err == nil; i++ {
		time.Sleep(pause)
		err = round(size)
	}
	if err == nil {
		if n, rerr := c.Read(buf); n != 0 || rerr != io.EOF {
			err = errors.New("after the transfer, rstream's shutdown: Read = " + strconv.Itoa(n) + ", " + errString(rerr) + "; want 0, io.EOF")
		}
	}
	c.Close()
	if err != nil {
		cancel()
		t.Errorf("Go client idling with KeepAlive 20ms: %v", err)
	}
	run := srv.Wait()
	checkRstream(t, run, rstreamCase{size: size, count: 1, iters: iters})
	if !strings.Contains(run.Out, "Keepalive: ON") {
		t.Errorf("rstream -k 1 did not turn its keepalive on")
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
