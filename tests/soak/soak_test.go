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
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// TestMain turns transparent huge pages off for the process (unless
// GOVERBS_SOAK_THP=1). With THP on, as Debian's kernel has it ("always"),
// khugepaged fills any 2 MiB range of anonymous memory that has a page in
// use with a huge page: a thread's stack or a stretch of the Go heap then
// counts 2 MiB in RSS, and the Go heap's scavenger later splits some of
// them again. Measured over 300 rdma_cm cycles: RSS up 3.9 MiB with THP,
// 0.7 MiB without, the difference in AnonHugePages; without, 2,000 cycles
// end 0.3 MiB up. Off, RSS counts the pages in use, and a leak shows
// sooner.
func TestMain(m *testing.M) {
	thpOff = os.Getenv("GOVERBS_SOAK_THP") != "1"
	if thpOff {
		const prSetTHPDisable = 41
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetTHPDisable, 1, 0); e != 0 {
			fmt.Fprintf(os.Stderr, "prctl(PR_SET_THP_DISABLE): %v\n", e)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// thpOff says whether TestMain turned transparent huge pages off.
var thpOff bool

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

// TestSoakConnections runs cmCycles rdma_cm connections after warmCycles,
// or GOVERBS_SOAK_CM_CYCLES (make soak SOAK_CM_CYCLES=N), and logs where
// the memory is every GOVERBS_SOAK_CM_EVERY cycles (100; see sample), so
// that a long run shows a slope or a plateau; GOVERBS_SOAK_MALLOC_TRIM=1
// gives the C heap's free memory back before each sample. The bound is
// the same whatever the count: a leak of a few KiB a cycle passes 200
// cycles and fails 2,000.
func TestSoakConnections(t *testing.T) {
	dev, _ := rxe.RequireDevice(t)
	addr := os.Getenv("RXE_ADDR")
	cycles := envInt(t, "GOVERBS_SOAK_CM_CYCLES", cmCycles)
	every := envInt(t, "GOVERBS_SOAK_CM_EVERY", 100)
	trim := os.Getenv("GOVERBS_SOAK_MALLOC_TRIM") == "1"
	maps := os.Getenv("GOVERBS_SOAK_SMAPS") == "1"
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
	if trim {
		mallocTrim()
	}
	start := measure(t, dev, fmt.Sprintf("after %d connections", warmCycles))
	t.Logf("transparent huge pages off for this process: %v (GOVERBS_SOAK_THP=1 leaves them on)", thpOff)
	samples := []sample{takeSample(t, dev, 0)}
	t.Log(samples[0])
	var lastMaps map[string]int64
	if maps {
		lastMaps = readSmaps(t)
	}
	for i := range cycles {
		connection(t, l, warmCycles+i)
		if (i+1)%every == 0 || i+1 == cycles {
			if trim {
				mallocTrim()
			}
			s := takeSample(t, dev, i+1)
			t.Log(s)
			samples = append(samples, s)
			if maps {
				m := readSmaps(t)
				t.Log(smapsDiff(lastMaps, m))
				lastMaps = m
			}
		}
	}
	end := measure(t, dev, fmt.Sprintf("after %d more", cycles))
	t.Log(slopes(samples))
	same(t, start, end)
	t.Logf("%d rdma_cm connect, transfer and disconnect cycles in %v", warmCycles+cycles, time.Since(began).Round(time.Millisecond))
}

// readSmaps returns the resident kB of each mapping of the process, keyed
// by its address range, permissions and name (GOVERBS_SOAK_SMAPS=1: which
// mapping grows).
func readSmaps(t *testing.T) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	var key string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			key = f[0] + " " + f[1]
			if len(f) >= 6 {
				key += " " + f[5]
			}
		case len(f) == 3 && f[0] == "Rss:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			out[key] += kb
		case len(f) == 3 && f[0] == "AnonHugePages:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			out[key+" (of it huge pages)"] += kb
		}
	}
	return out
}

// smapsDiff lists the mappings whose resident size changed by 32 kB or
// more, and the ones that came or went.
func smapsDiff(before, after map[string]int64) string {
	var lines []string
	var total int64
	for k, v := range after {
		if d := v - before[k]; d >= 32 || d <= -32 {
			_, was := before[k]
			lines = append(lines, fmt.Sprintf("  %+6d kB %s (now %d kB%s)", d, k, v, map[bool]string{true: "", false: ", new"}[was]))
		}
		if !strings.HasSuffix(k, " (of it huge pages)") {
			total += v - before[k]
		}
	}
	for k, v := range before {
		if _, ok := after[k]; !ok {
			if !strings.HasSuffix(k, " (of it huge pages)") {
				total -= v
			}
			if v >= 32 {
				lines = append(lines, fmt.Sprintf("  %+6d kB %s (gone)", -v, k))
			}
		}
	}
	slices.Sort(lines)
	return fmt.Sprintf("smaps: %+d kB resident in all mappings\n%s", total, strings.Join(lines, "\n"))
}

// envInt reads a positive count from the environment, def when unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive count", name, s)
	}
	return n
}

// sample is where the process's memory is after a number of measured
// cycles, taken after a GC that returned what the Go heap could.
type sample struct {
	cycle            int
	rss, anon, file  int64 // VmRSS, RssAnon, RssFile
	huge             int64 // AnonHugePages: transparent huge pages, in all mappings
	goHeap, goSys    int64 // the Go heap's live spans (HeapInuse); all the runtime holds from the system, less what it released
	cInuse, cHeld    int64 // C malloc's, over all arenas (mallinfo2); -1 where unknown
	threads, gs, fds int
	rdma             map[string]int
}

func takeSample(t *testing.T, dev string, cycle int) sample {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	s := sample{cycle: cycle, cInuse: -1, cHeld: -1, gs: runtime.NumGoroutine()}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		key string
		v   *int64
	}{{"VmRSS", &s.rss}, {"RssAnon", &s.anon}, {"RssFile", &s.file}} {
		m := regexp.MustCompile(f.key + `:\s+(\d+) kB`).FindSubmatch(status)
		if m == nil {
			t.Fatalf("no %s line in /proc/self/status:\n%s", f.key, status)
		}
		kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
		*f.v = kb << 10
	}
	if rollup, err := os.ReadFile("/proc/self/smaps_rollup"); err == nil {
		if m := regexp.MustCompile(`AnonHugePages:\s+(\d+) kB`).FindSubmatch(rollup); m != nil {
			kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
			s.huge = kb << 10
		}
	}
	if m := regexp.MustCompile(`Threads:\s+(\d+)`).FindSubmatch(status); m != nil {
		s.threads, _ = strconv.Atoi(string(m[1]))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.goHeap = int64(ms.HeapInuse)
	s.goSys = int64(ms.Sys - ms.HeapReleased)
	if u, h, ok := cHeap(); ok {
		s.cInuse, s.cHeld = u, h
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	s.fds = len(fds)
	s.rdma = testkit.ResourceCounts(t, dev)
	return s
}

func (s sample) String() string {
	mib := func(b int64) string {
		if b < 0 {
			return "?"
		}
		return fmt.Sprintf("%.2f", float64(b)/(1<<20))
	}
	return fmt.Sprintf("cycle %5d: RSS %s MiB (anon %s, of it huge pages %s; file %s); Go heap in use %s, Go runtime %s; C heap in use %s, held %s; %d threads, %d goroutines, %d fds; rdma qp %d cm_id %d",
		s.cycle, mib(s.rss), mib(s.anon), mib(s.huge), mib(s.file), mib(s.goHeap), mib(s.goSys), mib(s.cInuse), mib(s.cHeld),
		s.threads, s.gs, s.fds, s.rdma["qp"], s.rdma["cm_id"])
}

// slopes fits a line (least squares) to each figure over the second half
// of the samples and says how much it grows per 1,000 cycles: a slope
// near zero there is a plateau.
func slopes(ss []sample) string {
	half := ss[len(ss)/2:]
	if len(half) < 5 {
		// Two or three samples fit noise: the sampled RSS moves by a few
		// hundred KiB from one sample to the next.
		return fmt.Sprintf("%d samples in the second half, too few for a slope: GOVERBS_SOAK_CM_CYCLES=2000 (make soak SOAK_CM_CYCLES=2000) gives 10", len(half))
	}
	fit := func(get func(sample) int64) float64 {
		var n, sx, sy, sxx, sxy float64
		for _, s := range half {
			x, y := float64(s.cycle), float64(get(s))
			n++
			sx += x
			sy += y
			sxx += x * x
			sxy += x * y
		}
		return (n*sxy - sx*sy) / (n*sxx - sx*sx) * 1000 / (1 << 10)
	}
	return fmt.Sprintf("growth per 1,000 cycles from cycle %d to %d (KiB): RSS %.0f (anon %.0f, huge pages %.0f, file %.0f), Go heap %.0f, Go runtime %.0f, C heap in use %.0f, held %.0f",
		half[0].cycle, half[len(half)-1].cycle,
		fit(func(s sample) int64 { return s.rss }), fit(func(s sample) int64 { return s.anon }), fit(func(s sample) int64 { return s.huge }), fit(func(s sample) int64 { return s.file }),
		fit(func(s sample) int64 { return s.goHeap }), fit(func(s sample) int64 { return s.goSys }),
		fit(func(s sample) int64 { return s.cInuse }), fit(func(s sample) int64 { return s.cHeld }))
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
