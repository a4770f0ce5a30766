// Package cmtime is goverbs-cmtime: it times rdma_cm connection setup step by step, as
// rdma-core's cmtime does, and speaks to it: either side may be this
// program or the C one (both are plain rdma_cm peers on RDMA_PS_TCP, port
// 7471 by default, with no private data).
//
//	goverbs-cmtime -c 100                        # server: accept 100 connections, then exit
//	goverbs-cmtime -layer raw -c 100             # server over generated/rdmacm, the control for hand's
//	goverbs-cmtime -s 192.0.2.1 -c 100           # client over hand (Dial, Disconnect, Close)
//	goverbs-cmtime -s 192.0.2.1 -layer step      # client over hand's steps (NewConn, Bind, ResolveAddr...)
//	goverbs-cmtime -s 192.0.2.1 -layer raw       # client over generated/rdmacm, cmtime's calls
//	goverbs-cmtime -s 192.0.2.1 -b 192.0.2.1     # client from that source address
//	goverbs-cmtime -compare -runs 5 -c 100       # C cmtime against this, alternately (see compare.go)
//
// The client prints cmtime's table: per step the wall time of the step for
// all connections, the slowest and fastest connection, and the wall time
// per connection. The step layer runs cmtime's steps with hand's step
// methods (hand.NewConn is "create id": the event channel and the id),
// each for all connections at once, one goroutine each; with -b, "bind
// addr" (Conn.Bind) comes after it. The raw layer runs cmtime's steps with
// its calls, so its rows match the C tool's line for line: it is the
// control for what hand adds. hand.Dial does create id to connect in one
// call: the hand client times the part up to the QP (BeforeConnect, where
// every Dial waits until all have reached it) as "resolve+qp", and the
// connect after it as "connect"; -b is its ConnConfig.LocalAddr. -shared
// gives every connection one PD and one CQ (ConnConfig.PD, SendCQ), where
// C's cmtime and hand's default make them per connection.
//
// The server accepts -c connections on -b (default: any address),
// answers each disconnect and closes the connection, and exits when all
// are closed; with -cpu it prints its CPU time (user+system, getrusage)
// at exit. -layer raw makes it a server on generated/rdmacm with cmtime's
// server's calls (a QP on librdmacm's PD, rdma_accept; rdma_disconnect and
// rdma_destroy_id at DISCONNECTED), read from one channel by one
// goroutine: what a Go process pays for them with nothing of hand's, the
// control for hand's server.
package cmtime

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// The steps, in cmtime's order and with its names; resolveQP is hand's
// create id to create qp, which Dial does in one call.
const (
	stepCreateID = iota
	stepBind
	stepResolveAddr
	stepResolveRoute
	stepCreateQP
	stepResolveQP
	stepConnect
	stepDisconnect
	stepDestroy
	stepCount
)

var stepNames = [stepCount]string{"create id", "bind addr", "resolve addr", "resolve route", "create qp", "resolve+qp", "connect", "disconnect", "destroy"}

type config struct {
	server, bind string
	port         int
	conns        int
	layer        string
	shared       bool
	destroyQP    bool
	cpu          bool
	timeout      time.Duration
}

// Main runs goverbs-cmtime with args (without the program's name) and
// returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("goverbs-cmtime", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var cmp compareConfig
	fs.StringVar(&cfg.server, "s", "", "server address: run as the client (without it, the server)")
	fs.StringVar(&cfg.bind, "b", "", "bind address: the server listens on it, a client connects from it (default: any)")
	fs.IntVar(&cfg.port, "p", 7471, "port")
	fs.IntVar(&cfg.conns, "c", 100, "connections")
	fs.StringVar(&cfg.layer, "layer", "hand", "the layer: hand (Dial; a server: Listen), step (a client on hand's NewConn and step methods), or raw (generated/rdmacm, cmtime's calls)")
	fs.BoolVar(&cfg.shared, "shared", false, "one PD and one CQ for all connections (hand and step only)")
	fs.BoolVar(&cfg.destroyQP, "destroy-qp", false, "-layer raw: rdma_destroy_qp each QP, the server's at DISCONNECTED, the client's in its destroy step, as hand's Conn.Close does (cmtime never does)")
	fs.BoolVar(&cfg.cpu, "cpu", false, "server: print the process's CPU time at exit")
	fs.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "give up after this long")
	prof := fs.String("cpuprofile", "", "write a CPU profile (pprof) of the run to this file")
	fs.BoolVar(&cmp.on, "compare", false, "run C cmtime and this program alternately in one soft-RoCE guest and print the ratios")
	fs.IntVar(&cmp.runs, "runs", 5, "-compare: runs of each variant")
	fs.StringVar(&cmp.cmtime, "cmtime", "cmtime", "-compare: rdma-core's cmtime")
	fs.StringVar(&cmp.addr, "addr", "192.0.2.1", "-compare: the server's address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.conns < 0 || (cfg.layer != "hand" && cfg.layer != "step" && cfg.layer != "raw") || (cfg.shared && cfg.layer == "raw") {
		fmt.Fprintln(stderr, "goverbs-cmtime: -c must be 0 or more, -layer hand, step or raw, and -shared needs -layer hand or step")
		return 2
	}
	if cfg.bind != "" {
		if _, err := netip.ParseAddr(cfg.bind); err != nil {
			fmt.Fprintln(stderr, "goverbs-cmtime: -b:", err)
			return 2
		}
	}
	if *prof != "" {
		f, err := os.Create(*prof)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "goverbs-cmtime:", err)
			return 1
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	var err error
	switch {
	case cmp.on:
		cmp.conns = cfg.conns
		err = compare(ctx, cmp, stdout, stderr)
	case cfg.server == "" && cfg.layer == "raw":
		err = serveRaw(ctx, cfg, stdout)
	case cfg.server == "":
		err = serve(ctx, cfg, stdout)
	default:
		var t *timings
		switch cfg.layer {
		case "raw":
			t, err = clientRaw(ctx, cfg, stdout)
		case "step":
			t, err = clientStep(ctx, cfg, stdout)
		default:
			t, err = clientHand(ctx, cfg, stdout)
		}
		if err == nil {
			t.print(stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "goverbs-cmtime:", err)
		return 1
	}
	return 0
}

// timings holds each step's wall time and each connection's times, as
// cmtime keeps them.
type timings struct {
	conns int
	shown [stepCount]bool
	total [stepCount][2]time.Time
	per   [][stepCount][2]time.Time
}

func newTimings(n int) *timings { return &timings{conns: n, per: make([][stepCount][2]time.Time, n)} }

func (t *timings) start(s int) { t.shown[s] = true; t.total[s][0] = time.Now() }
func (t *timings) end(s int)   { t.total[s][1] = time.Now() }

// print writes cmtime's table: total ms, max ms, min us, us / conn.
func (t *timings) print(w io.Writer) {
	fmt.Fprintln(w, "step              total ms     max ms     min us  us / conn")
	for s := range stepCount {
		if !t.shown[s] {
			continue
		}
		lo, hi := time.Duration(-1), time.Duration(0)
		for i := range t.per {
			a, b := t.per[i][s][0], t.per[i][s][1]
			if a.IsZero() || b.IsZero() {
				continue
			}
			d := b.Sub(a)
			hi = max(hi, d)
			if lo < 0 || d < lo {
				lo = d
			}
		}
		if lo < 0 {
			lo = 999999999 * time.Microsecond
		}
		us := float64(t.total[s][1].Sub(t.total[s][0])) / 1e3
		fmt.Fprintf(w, "%-13s: %11.2f%11.2f%11.2f%11.2f\n", stepNames[s], us/1000, float64(hi)/1e6, float64(lo)/1e3, us/float64(max(t.conns, 1)))
	}
}

func (cfg config) addr(host string) string {
	return netip.AddrPortFrom(netip.MustParseAddr(host), uint16(cfg.port)).String()
}

// source is the client's source address, -b with any port, or the zero
// AddrPort without -b.
func (cfg config) source() netip.AddrPort {
	if cfg.bind == "" {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(netip.MustParseAddr(cfg.bind), 0)
}

// connConfig is cmtime's QP: one WR and one SGE each way.
func connConfig() hand.ConnConfig {
	return hand.ConnConfig{Caps: hand.QPCaps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 2}
}

// shared makes the one PD and CQ every connection uses.
type shared struct {
	once sync.Once
	pd   *hand.PD
	cq   *hand.CQ
	err  error
}

func (s *shared) get(ctx *hand.Context, conns int) (*hand.PD, *hand.CQ, error) {
	s.once.Do(func() {
		if s.pd, s.err = ctx.AllocPD(); s.err == nil {
			s.cq, s.err = ctx.NewCQ(max(2*conns, 1), hand.CQOptions{})
		}
	})
	return s.pd, s.cq, s.err
}

// prepare makes what a hand client needs before its clock runs:
// librdmacm's device context, since librdmacm reads the devices once, at a
// process's first call (C's cmtime makes it, creating its event channel,
// before its clock runs), and with -shared the one PD and CQ, set in cc.
// The caller closes the context.
func (s *shared) prepare(cc *hand.ConnConfig, cfg config) (*hand.Context, error) {
	dev, err := hand.CMContext("")
	if err != nil {
		return nil, err
	}
	if cfg.shared {
		if cc.PD, cc.SendCQ, err = s.get(dev, cfg.conns); err != nil {
			dev.Close()
			return nil, err
		}
	}
	return dev, nil
}

func (s *shared) close() {
	if s.cq != nil {
		s.cq.Close()
	}
	if s.pd != nil {
		s.pd.Close()
	}
}

// clientHand dials cfg.conns connections at once over hand, each waiting
// in BeforeConnect until all have their QP, then disconnects them all at
// once and closes them one by one.
func clientHand(ctx context.Context, cfg config, stdout io.Writer) (*timings, error) {
	t := newTimings(cfg.conns)
	addr := cfg.addr(cfg.server)
	cc := connConfig()
	cc.LocalAddr = cfg.source()
	var sh shared
	defer sh.close()
	dev, err := sh.prepare(&cc, cfg)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	conns := make([]*hand.Conn, cfg.conns)
	errs := make([]error, cfg.conns)
	var atQP sync.WaitGroup
	atQP.Add(cfg.conns)
	release := make(chan struct{})
	var wg sync.WaitGroup
	fmt.Fprintln(stdout, "resolving and creating qp")
	t.start(stepResolveQP)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cc
			arrived := false
			c.BeforeConnect = func(*hand.Conn) error {
				t.per[i][stepResolveQP][1] = time.Now()
				arrived = true
				atQP.Done()
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
				t.per[i][stepConnect][0] = time.Now()
				return nil
			}
			t.per[i][stepResolveQP][0] = time.Now()
			conns[i], errs[i] = hand.Dial(ctx, addr, c)
			t.per[i][stepConnect][1] = time.Now()
			if !arrived {
				atQP.Done()
			}
		}()
	}
	atQP.Wait()
	t.end(stepResolveQP)
	fmt.Fprintln(stdout, "connecting")
	t.start(stepConnect)
	close(release)
	wg.Wait()
	t.end(stepConnect)
	for i, err := range errs {
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	fmt.Fprintln(stdout, "disconnecting")
	t.start(stepDisconnect)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.per[i][stepDisconnect][0] = time.Now()
			errs[i] = c.Disconnect(ctx)
			t.per[i][stepDisconnect][1] = time.Now()
		}()
	}
	wg.Wait()
	t.end(stepDisconnect)
	fmt.Fprintln(stdout, "destroying id")
	t.start(stepDestroy)
	for i, c := range conns {
		t.per[i][stepDestroy][0] = time.Now()
		if err := c.Close(); err != nil && errs[i] == nil {
			errs[i] = err
		}
		t.per[i][stepDestroy][1] = time.Now()
	}
	t.end(stepDestroy)
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	return t, nil
}

// clientStep is cmtime's client on hand's step methods: each step is
// started for every connection at once, one goroutine each, and timed
// until the last one returns, as cmtime starts a step for all its ids and
// waits for all their events.
func clientStep(ctx context.Context, cfg config, stdout io.Writer) (*timings, error) {
	t := newTimings(cfg.conns)
	addr := cfg.addr(cfg.server)
	cc := connConfig()
	var sh shared
	defer sh.close()
	dev, err := sh.prepare(&cc, cfg)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	conns := make([]*hand.Conn, cfg.conns)
	defer closeAll(conns) // after a failure: Close is a no-op on a closed Conn
	errs := make([]error, cfg.conns)
	// each runs step s (what, cmtime's message) for every connection at
	// once and returns the first failure.
	each := func(s int, what string, do func(i int) error) error {
		fmt.Fprintln(stdout, what)
		var wg sync.WaitGroup
		t.start(s)
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.per[i][s][0] = time.Now()
				errs[i] = do(i)
				t.per[i][s][1] = time.Now()
			}()
		}
		wg.Wait()
		t.end(s)
		for i, err := range errs {
			if err != nil {
				return fmt.Errorf("connection %d, %s: %w", i, stepNames[s], err)
			}
		}
		return nil
	}
	steps := []struct {
		step int
		what string
		do   func(i int) error
	}{
		{stepCreateID, "creating id", func(i int) (err error) { conns[i], err = hand.NewConn(cc); return err }},
		{stepBind, "binding source address", func(i int) error { return conns[i].Bind(cfg.source()) }},
		{stepResolveAddr, "resolving address", func(i int) error { return conns[i].ResolveAddr(ctx, addr) }},
		{stepResolveRoute, "resolving route", func(i int) error { return conns[i].ResolveRoute(ctx) }},
		{stepCreateQP, "creating qp", func(i int) error { return conns[i].CreateQP() }},
		{stepConnect, "connecting", func(i int) error { return conns[i].Connect(ctx) }},
		{stepDisconnect, "disconnecting", func(i int) error { return conns[i].Disconnect(ctx) }},
		{stepDestroy, "destroying id", func(i int) error { return conns[i].Close() }},
	}
	for _, s := range steps {
		if s.step == stepBind && cfg.bind == "" {
			continue
		}
		if err := each(s.step, s.what, s.do); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func closeAll(conns []*hand.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// serve accepts cfg.conns connections over hand, each on a goroutine of
// its own that waits for the client's disconnect, answers it and closes.
func serve(ctx context.Context, cfg config, stdout io.Writer) error {
	bind := cfg.bind
	if bind == "" {
		bind = "0.0.0.0"
	}
	l, err := hand.Listen(ctx, cfg.addr(bind))
	if err != nil {
		return err
	}
	defer l.Close()
	cc := connConfig()
	var sh shared
	defer sh.close()
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range cfg.conns {
		req, err := l.Accept(ctx)
		if err != nil {
			return err
		}
		c := cc
		if cfg.shared {
			dev := req.Context()
			if c.PD, c.SendCQ, err = sh.get(dev, cfg.conns); err != nil {
				dev.Close()
				req.Reject(nil)
				return err
			}
			dev.Close()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := req.Accept(ctx, c)
			if err == nil {
				err = conn.WaitDisconnect(ctx)
				if cerr := conn.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		}()
	}
	wg.Wait()
	printCPU(cfg, stdout)
	if p := failed.Load(); p != nil {
		return *p
	}
	return nil
}

// printCPU prints the process's CPU time so far, with -cpu.
func printCPU(cfg config, stdout io.Writer) {
	if !cfg.cpu {
		return
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		fmt.Fprintf(stdout, "cpu us %d\n", (time.Duration(ru.Utime.Nano())+time.Duration(ru.Stime.Nano()))/time.Microsecond)
	}
}

// qpAttr is cmtime's QP attributes, one struct for every rdma_create_qp,
// as cmtime's global is. Its CQs are nil, so librdmacm makes the first
// QP's (a CQ and a completion channel each way) and writes them back into
// the struct: every later QP then shares the first's CQs. A copy a call
// would make four objects more for each QP, which cmtime does not.
func qpAttr() verbs.QPInitAttr {
	return verbs.QPInitAttr{QPType: verbs.QPTRC, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
}

// serveRaw is cmtime's server on generated/rdmacm: one event channel,
// read by this goroutine (blocking in rdma_get_cm_event, as cmtime's
// thread does); per request a QP on librdmacm's PD (the CQs as qpAttr
// says) and rdma_accept; per DISCONNECTED rdma_disconnect and
// rdma_destroy_id, as cmtime's server. It returns once cfg.conns connections are gone.
func serveRaw(ctx context.Context, cfg config, stdout io.Writer) error {
	if err := rdmacm.Load(); err != nil {
		return err
	}
	ch, err := rdmacm.CreateEventChannel()
	if err != nil {
		return fmt.Errorf("rdma_create_event_channel: %w", err)
	}
	defer rdmacm.DestroyEventChannel(ch)
	var lid *rdmacm.CMID
	if err := rdmacm.CreateID(ch, &lid, nil, rdmacm.PsTCP); err != nil {
		return fmt.Errorf("rdma_create_id: %w", err)
	}
	defer rdmacm.DestroyID(lid)
	bind := cfg.bind
	if bind == "" {
		bind = "0.0.0.0"
	}
	if err := rdmacm.BindAddr(lid, rdmacm.SockaddrOf(netip.MustParseAddrPort(cfg.addr(bind)))); err != nil {
		return fmt.Errorf("rdma_bind_addr: %w", err)
	}
	if err := rdmacm.Listen(lid, 128); err != nil {
		return fmt.Errorf("rdma_listen: %w", err)
	}
	attr := qpAttr()
	param := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 2}
	for gone := 0; gone < cfg.conns; {
		if err := ctx.Err(); err != nil {
			return err
		}
		var ev *rdmacm.CMEvent
		if err := rdmacm.GetCMEvent(ch, &ev); err != nil {
			return fmt.Errorf("rdma_get_cm_event: %w", err)
		}
		id, typ, status := ev.ID, ev.Event, ev.Status
		rdmacm.ACKCMEvent(ev) // before any destroy of its id, which waits for it
		switch typ {
		case rdmacm.CMEventConnectRequest:
			// attr itself, as cmtime's one global: see qpAttr.
			if err := rdmacm.CreateQP(id, nil, &attr); err != nil {
				return fmt.Errorf("rdma_create_qp: %w", err)
			}
			p := param
			if err := rdmacm.Accept(id, &p); err != nil {
				return fmt.Errorf("rdma_accept: %w", err)
			}
		case rdmacm.CMEventEstablished, rdmacm.CMEventTimewaitExit:
		case rdmacm.CMEventDisconnected:
			// cmtime's server makes no rdma_destroy_qp; -destroy-qp
			// adds it, the one verb hand's Conn.Close makes beyond these.
			rdmacm.Disconnect(id)
			if cfg.destroyQP {
				rdmacm.DestroyQP(id)
			}
			rdmacm.DestroyID(id)
			gone++
		default:
			return fmt.Errorf("event %d, status %d", typ, status)
		}
	}
	printCPU(cfg, stdout)
	return nil
}

// clientRaw is cmtime's client on generated/rdmacm, call for call: one
// event channel read by one goroutine, each step started for every
// connection before waiting for all to finish. It says what hand adds over
// the bare cgo calls.
func clientRaw(ctx context.Context, cfg config, stdout io.Writer) (*timings, error) {
	if err := rdmacm.Load(); err != nil {
		return nil, err
	}
	n := cfg.conns
	t := newTimings(n)
	ch, err := rdmacm.CreateEventChannel()
	if err != nil {
		return nil, fmt.Errorf("rdma_create_event_channel: %w", err)
	}
	defer rdmacm.DestroyEventChannel(ch)
	ids := make([]*rdmacm.CMID, n)
	index := make(map[*rdmacm.CMID]int, n)
	fmt.Fprintln(stdout, "creating id")
	t.start(stepCreateID)
	for i := range ids {
		t.per[i][stepCreateID][0] = time.Now()
		var id *rdmacm.CMID
		if err := rdmacm.CreateID(ch, &id, nil, rdmacm.PsTCP); err != nil {
			return nil, fmt.Errorf("rdma_create_id: %w", err)
		}
		ids[i] = id
		index[id] = i
		t.per[i][stepCreateID][1] = time.Now()
	}
	t.end(stepCreateID)
	defer func() {
		fmt.Fprintln(stdout, "destroying id")
		t.start(stepDestroy)
		for i, id := range ids {
			t.per[i][stepDestroy][0] = time.Now()
			if cfg.destroyQP {
				rdmacm.DestroyQP(id)
			}
			rdmacm.DestroyID(id)
			t.per[i][stepDestroy][1] = time.Now()
		}
		t.end(stepDestroy)
	}()

	// The event loop: each event ends its connection's step and counts
	// towards the step's WaitGroup; the loop ends with the last
	// DISCONNECTED.
	var steps [stepCount]sync.WaitGroup
	var evErr atomic.Pointer[error]
	for _, s := range []int{stepResolveAddr, stepResolveRoute, stepConnect, stepDisconnect} {
		steps[s].Add(n)
	}
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for disc := 0; disc < n; {
			var ev *rdmacm.CMEvent
			if err := rdmacm.GetCMEvent(ch, &ev); err != nil {
				e := fmt.Errorf("rdma_get_cm_event: %w", err)
				evErr.CompareAndSwap(nil, &e)
				return
			}
			i, typ, status := index[ev.ID], ev.Event, ev.Status
			rdmacm.ACKCMEvent(ev)
			step := -1
			switch typ {
			case rdmacm.CMEventAddrResolved:
				step = stepResolveAddr
			case rdmacm.CMEventRouteResolved:
				step = stepResolveRoute
			case rdmacm.CMEventEstablished:
				step = stepConnect
			case rdmacm.CMEventDisconnected:
				step = stepDisconnect
				disc++
			case rdmacm.CMEventTimewaitExit:
				continue
			default:
				e := fmt.Errorf("connection %d: event %d, status %d", i, typ, status)
				evErr.CompareAndSwap(nil, &e)
				return
			}
			t.per[i][step][1] = time.Now()
			steps[step].Done()
		}
	}()
	wait := func(s int) error {
		done := make(chan struct{})
		go func() { steps[s].Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-loopDone:
			if p := evErr.Load(); p != nil {
				return *p
			}
			<-done
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	if cfg.bind != "" {
		src := rdmacm.SockaddrOf(cfg.source())
		fmt.Fprintln(stdout, "binding source address")
		t.start(stepBind)
		for i, id := range ids {
			t.per[i][stepBind][0] = time.Now()
			if err := rdmacm.BindAddr(id, src); err != nil {
				return nil, fmt.Errorf("rdma_bind_addr: %w", err)
			}
			t.per[i][stepBind][1] = time.Now()
		}
		t.end(stepBind)
	}
	dst := rdmacm.SockaddrOf(netip.MustParseAddrPort(cfg.addr(cfg.server)))
	fmt.Fprintln(stdout, "resolving address")
	t.start(stepResolveAddr)
	for i, id := range ids {
		t.per[i][stepResolveAddr][0] = time.Now()
		if err := rdmacm.ResolveAddr(id, nil, dst, 2000); err != nil {
			return nil, fmt.Errorf("rdma_resolve_addr: %w", err)
		}
	}
	if err := wait(stepResolveAddr); err != nil {
		return nil, err
	}
	t.end(stepResolveAddr)
	fmt.Fprintln(stdout, "resolving route")
	t.start(stepResolveRoute)
	for i, id := range ids {
		t.per[i][stepResolveRoute][0] = time.Now()
		if err := rdmacm.ResolveRoute(id, 2000); err != nil {
			return nil, fmt.Errorf("rdma_resolve_route: %w", err)
		}
	}
	if err := wait(stepResolveRoute); err != nil {
		return nil, err
	}
	t.end(stepResolveRoute)
	fmt.Fprintln(stdout, "creating qp")
	attr := qpAttr()
	t.start(stepCreateQP)
	for i, id := range ids {
		t.per[i][stepCreateQP][0] = time.Now()
		if err := rdmacm.CreateQP(id, nil, &attr); err != nil { // attr itself: see qpAttr
			return nil, fmt.Errorf("rdma_create_qp: %w", err)
		}
		t.per[i][stepCreateQP][1] = time.Now()
	}
	t.end(stepCreateQP)
	fmt.Fprintln(stdout, "connecting")
	param := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 2}
	t.start(stepConnect)
	for i, id := range ids {
		t.per[i][stepConnect][0] = time.Now()
		p := param
		if err := rdmacm.Connect(id, &p); err != nil {
			return nil, fmt.Errorf("rdma_connect: %w", err)
		}
	}
	if err := wait(stepConnect); err != nil {
		return nil, err
	}
	t.end(stepConnect)
	fmt.Fprintln(stdout, "disconnecting")
	t.start(stepDisconnect)
	for i, id := range ids {
		t.per[i][stepDisconnect][0] = time.Now()
		rdmacm.Disconnect(id) // cmtime destroys no QP: rdma_destroy_id alone, at exit
	}
	if err := wait(stepDisconnect); err != nil {
		return nil, err
	}
	t.end(stepDisconnect)
	<-loopDone
	return t, nil
}
