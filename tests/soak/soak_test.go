// Package soak holds the long-run test of goverbs on soft-RoCE: the full
// verbs object set made and destroyed a thousand times, two hundred rdma_cm
// connections, a million messages over one RC connection; and then the
// process's RSS, its open descriptors and the device's resource counts
// (`rdma resource`) back where they started. It runs inside the soft-RoCE
// VM (`make soak`, part of `make test`), like tests/rxe, and skips, naming
// why, everywhere else.
package soak

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"github.com/goverbs/goverbs/tests/rxe"
)

const (
	objectCycles = 1000
	cmCycles     = 200
	messages     = 1_000_000
	chain        = 64
	// warmCycles of each phase run before the baseline is taken: the first
	// ones grow the Go heap, the C allocator's arenas and librdmacm's
	// caches to their working size, which is not a leak.
	warmCycles = 50
	// rssSlack is how far RSS may end above the baseline: the Go heap and
	// glibc's arenas do not return every page they once touched.
	rssSlack = 8 << 20
)

// usage is what the test compares before and after.
type usage struct {
	rss   int64          // bytes (VmRSS)
	fds   int            // entries of /proc/self/fd
	rdma  map[string]int // `rdma resource show DEV`: pd, cq, qp, cm_id, mr, ctx, srq
	label string
}

func (u usage) String() string {
	keys := []string{"ctx", "pd", "mr", "cq", "qp", "srq", "cm_id"}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: RSS %.1f MiB, %d fds, rdma", u.label, float64(u.rss)/(1<<20), u.fds)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s %d", k, u.rdma[k])
	}
	return b.String()
}

func measure(t *testing.T, dev, label string) usage {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	u := usage{label: label, rdma: map[string]int{}}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no VmRSS line in /proc/self/status:\n%s", status)
	}
	kb, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	u.rss = kb << 10
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	u.fds = len(fds)
	u.rdma = testkit.ResourceCounts(t, dev)
	return u
}

// same fails the test unless end is back at start: descriptors and device
// resources exactly, RSS within rssSlack.
func same(t *testing.T, start, end usage) {
	t.Helper()
	t.Log(start)
	t.Log(end)
	if end.fds != start.fds {
		t.Errorf("%d open descriptors after, %d before", end.fds, start.fds)
	}
	for k, v := range start.rdma {
		if end.rdma[k] != v {
			t.Errorf("rdma resource %s: %d after, %d before", k, end.rdma[k], v)
		}
	}
	if end.rss > start.rss+rssSlack {
		t.Errorf("RSS grew by %.1f MiB (more than %d MiB)", float64(end.rss-start.rss)/(1<<20), rssSlack>>20)
	}
}

// objects makes and destroys the full verbs object set once: context, PD,
// MR, completion channel and CQ, two RC QPs connected to each other
// through RTS, an SRQ and an AH.
func objects(t *testing.T, dev string, gidIndex int) {
	t.Helper()
	var closers []interface{ Close() error }
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i].Close(); err != nil {
				t.Fatalf("closing %T: %v", closers[i], err)
			}
		}
	}()
	keep := func(c interface{ Close() error }, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, c)
	}
	ctx, err := hand.Open(dev)
	keep(ctx, err)
	gid, err := ctx.QueryGID(1, gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	keep(pd, err)
	mr, err := pd.Alloc(1<<16, hand.AccessLocalWrite|hand.AccessRemoteWrite)
	keep(mr, err)
	ch, err := ctx.NewCompChannel()
	keep(ch, err)
	cq, err := ctx.NewCQ(64, hand.CQOptions{Channel: ch})
	keep(cq, err)
	srq, err := pd.NewSRQ(hand.SRQConfig{MaxWR: 16, MaxSGE: 1})
	keep(srq, err)
	var qps [2]*hand.QP
	for i := range qps {
		qps[i], err = pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: cq, Caps: hand.QPCaps{MaxSendWR: 8, MaxRecvWR: 8}})
		keep(qps[i], err)
	}
	for i, q := range qps {
		peer := qps[1-i]
		if err := q.Connect(hand.ConnectAttr{SGIDIndex: gidIndex, Access: hand.AccessLocalWrite | hand.AccessRemoteWrite,
			PSN: 100, Remote: hand.Endpoint{QPN: peer.Num(), PSN: 100, GID: gid}}); err != nil {
			t.Fatal(err)
		}
	}
	ah, err := pd.NewAH(hand.Path{DGID: gid, SGIDIndex: gidIndex})
	keep(ah, err)
}

func TestSoakObjects(t *testing.T) {
	dev, gidIndex := rxe.RequireDevice(t)
	began := time.Now()
	for range warmCycles {
		objects(t, dev, gidIndex)
	}
	start := measure(t, dev, fmt.Sprintf("after %d cycles", warmCycles))
	for range objectCycles {
		objects(t, dev, gidIndex)
	}
	end := measure(t, dev, fmt.Sprintf("after %d more", objectCycles))
	same(t, start, end)
	t.Logf("%d create-and-destroy cycles of context, PD, MR, channel, CQ, 2 RC QPs to RTS, SRQ, AH in %v",
		warmCycles+objectCycles, time.Since(began).Round(time.Millisecond))
}

// connection dials the listener, sends one message to the accepted side,
// checks it arrived, and disconnects.
func connection(t *testing.T, l *hand.Listener, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type accepted struct {
		c   *hand.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			acc <- accepted{nil, err}
			return
		}
		c, err := req.Accept(ctx, hand.ConnConfig{})
		acc <- accepted{c, err}
	}()
	cli, err := hand.Dial(ctx, l.Addr().String(), hand.ConnConfig{})
	if err != nil {
		t.Fatalf("cycle %d: %v", i, err)
	}
	a := <-acc
	if a.err != nil {
		t.Fatalf("cycle %d: accept: %v", i, a.err)
	}
	srv := a.c
	smr, err := srv.PD().Alloc(4096, hand.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	cmr, err := cli.PD().Alloc(4096, hand.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	// Freed with the cycle, not at the test's end: kept, 200 cycles' chains
	// would count against the RSS slack as a leak would.
	rc, err := hand.NewRecvChain(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	sc, err := hand.NewSendChain(1, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	rp, err := hand.NewPoller(srv.RecvCQ(), 1)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := hand.NewPoller(cli.SendCQ(), 1)
	if err != nil {
		t.Fatal(err)
	}
	rc.Reserve(1).Set(0, 1, smr.SGE(0, 4096))
	if err := rc.PostRecvv(srv); err != nil {
		t.Fatal(err)
	}
	msg := fmt.Sprintf("connection %d", i)
	copy(cmr.Bytes(), msg)
	sc.Reserve(1).SetSend(0, 2, hand.Signaled, cmr.SGE(0, len(msg)))
	if err := sc.PostSendv(cli); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*hand.Poller{sp, rp} {
		wcs, err := p.Wait(ctx)
		if err != nil || len(wcs) != 1 || !wcs[0].OK() {
			t.Fatalf("cycle %d: %v %s", i, err, testkit.DescribeWCs(wcs))
		}
	}
	if got := string(smr.Bytes()[:len(msg)]); got != msg {
		t.Fatalf("cycle %d: received %q", i, got)
	}
	rp.Close()
	sp.Close()
	// The DISCONNECTED event comes when the peer answers, which its
	// WaitDisconnect does: wait on both sides at once.
	waited := make(chan error, 1)
	go func() { waited <- srv.WaitDisconnect(ctx) }()
	if err := cli.Disconnect(ctx); err != nil {
		t.Fatalf("cycle %d: client Disconnect: %v", i, err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("cycle %d: server WaitDisconnect: %v", i, err)
	}
	for _, c := range []interface{ Close() error }{smr, cmr, srv, cli} {
		if err := c.Close(); err != nil {
			t.Fatalf("cycle %d: closing %T: %v", i, c, err)
		}
	}
}

func TestSoakConnections(t *testing.T) {
	dev, _ := rxe.RequireDevice(t)
	addr := os.Getenv("RXE_ADDR")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	l, err := hand.Listen(ctx, addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseLater(t, "listener", l)
	for i := range warmCycles {
		connection(t, l, i)
	}
	start := measure(t, dev, fmt.Sprintf("after %d connections", warmCycles))
	for i := range cmCycles {
		connection(t, l, warmCycles+i)
	}
	end := measure(t, dev, fmt.Sprintf("after %d more", cmCycles))
	same(t, start, end)
	t.Logf("%d rdma_cm connect, transfer and disconnect cycles in %v", warmCycles+cmCycles, time.Since(began).Round(time.Millisecond))
}

func TestSoakMessages(t *testing.T) {
	dev, gidIndex := rxe.RequireDevice(t)
	start := measure(t, dev, "before")
	began := time.Now()
	func() {
		ctx, err := hand.Open(dev)
		if err != nil {
			t.Fatal(err)
		}
		defer ctx.Close()
		gid, err := ctx.QueryGID(1, gidIndex)
		if err != nil {
			t.Fatal(err)
		}
		pd, err := ctx.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		defer pd.Close()
		const slot = 64
		mr, err := pd.Alloc(2*chain*slot, hand.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		defer mr.Close()
		ch, err := ctx.NewCompChannel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		scq, err := ctx.NewCQ(2*chain, hand.CQOptions{Channel: ch})
		if err != nil {
			t.Fatal(err)
		}
		defer scq.Close()
		rcq, err := ctx.NewCQ(2*chain, hand.CQOptions{Channel: ch})
		if err != nil {
			t.Fatal(err)
		}
		defer rcq.Close()
		a, err := pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: scq, RecvCQ: rcq, Caps: hand.QPCaps{MaxSendWR: chain, MaxRecvWR: chain}})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: scq, RecvCQ: rcq, Caps: hand.QPCaps{MaxSendWR: chain, MaxRecvWR: chain}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		for _, p := range [][2]*hand.QP{{a, b}, {b, a}} {
			if err := p[0].Connect(hand.ConnectAttr{SGIDIndex: gidIndex, Access: hand.AccessLocalWrite, PSN: 7,
				Remote: hand.Endpoint{QPN: p[1].Num(), PSN: 7, GID: gid}}); err != nil {
				t.Fatal(err)
			}
		}
		rc, err := hand.NewRecvChain(chain, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close() // before the "after" measure, as everything else here
		sc, err := hand.NewSendChain(chain, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		sp, err := hand.NewPoller(scq, chain)
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		rp, err := hand.NewPoller(rcq, chain)
		if err != nil {
			t.Fatal(err)
		}
		defer rp.Close()
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// reap waits for exactly n completions on p, which must carry the
		// wr_ids next, next+1... in order, all successful.
		reap := func(p *hand.Poller, n int, next uint64, what string) {
			for got := 0; got < n; {
				wcs, err := p.Wait(wctx)
				if err != nil {
					t.Fatalf("%s: %v after %d of %d", what, err, got, n)
				}
				for i := range wcs {
					if !wcs[i].OK() || wcs[i].WRID() != next+uint64(got) {
						t.Fatalf("%s: completion %d: %s", what, got, testkit.DescribeWCs(wcs))
					}
					got++
				}
			}
		}
		for sent := 0; sent < messages; sent += chain {
			id := uint64(sent)
			v := rc.Reserve(chain)
			for i := range chain {
				v.Set(i, id+uint64(i), mr.SGE(chain*slot+i*slot, slot))
			}
			if err := rc.PostRecv(b); err != nil {
				t.Fatal(err)
			}
			w := sc.Reserve(chain)
			for i := range chain {
				w.SetSend(i, id+uint64(i), hand.Signaled, mr.SGE(i*slot, slot))
			}
			if err := sc.PostSend(a); err != nil {
				t.Fatal(err)
			}
			reap(sp, chain, id, "sends")
			reap(rp, chain, id, "receives")
		}
	}()
	t.Logf("%d messages in chains of %d over one RC connection in %v, every send and receive completion accounted for",
		messages, chain, time.Since(began).Round(time.Millisecond))
	same(t, start, measure(t, dev, "after"))
}
