// Package perf is goverbs-perf: RC bandwidth (send, RDMA write, RDMA read)
// and send latency over goverbs' fast paths, reported as perftest reports
// them.
//
// Flags, as perftest's where they exist: -t mode (send_bw, write_bw,
// read_bw, send_lat), -d device, -i port, -x GID index, -s size (default
// 65536 for bandwidth, 2 for latency), -n iterations (5000 and 1000), -p TCP
// port (18515), -l post list (WRs per ibv_post_send; default 1), -Q CQ
// moderation (one signaled WR in Q; by default perftest's: 100, but 1 for
// messages over 8192 bytes without -e, and the post list when -l is above
// 1), -tx-depth and -rx-depth (perftest's -t and -r: 128 and 512; -t is the
// mode here). Combinations the bandwidth client could not finish are
// refused, by perftest's rules (sendPlan.check); send_lat posts one
// signaled send at a time, whatever -l and -Q say. A host argument makes
// the client, which drives the test and reports it; the server reports too
// for send_bw and send_lat. The command line is read as perftest's
// getopt_long reads its own (package getopt: -ex1, -s4096, the host
// anywhere), with perftest's long names for its flags (--size, --iters,
// --port, --ib-dev, --ib-port, --gid-index, --post_list, --cq-mod,
// --events, --CPU-freq; -tx-depth and -rx-depth are both) and their
// prefixes (--iter).
//
// The two sides exchange QP number, PSN, GID, buffer address and rkey over
// TCP, connect, and synchronise with one byte each way before the timed
// part and after it. A side whose loop waits on the peer gives it up
// (peerWatch) when the side channel closes, at once, and when nothing
// completes for 60 s, as perftest's send_bw server does (check_alive).
// What the peer sends is checked before use (see peer.unmarshal): a 24-bit
// QPN and PSN, an address, a buffer that does not wrap; its rkey and the
// size of its buffer are its own to get right. Sends are never inline, as
// perftest's default on rxe.
//
// The timed loop (posting, polling) does not allocate: each side prints
// "heap allocations in the timed loop: N (and K by the Go runtime alone)"
// after its results (package loopallocs writes and reads it), counted from the heap profile between the two syncs
// (N: stacks with a frame outside package runtime; K: the runtime's own,
// stacks all in the runtime or starting a thread, whose m and g0 it
// allocates even from the loop's stack). Both are the process's, so
// they mean something when the side runs alone in its process; tests/rxe
// checks that N is 0. -cpuprofile FILE writes a CPU profile of the timed
// part, -trace FILE a runtime execution trace of it (go tool trace); the
// profiler's and the tracer's own allocations are not counted. In send_lat,
// -lat-dump FILE writes each round trip's start (CLOCK_MONOTONIC) and
// length, for lining them up with the kernel's scheduler events
// (goverbs-perfcompare -tails). -loop c runs the bandwidth loops written in
// C (cloop.c) instead, in the same process, to tell what the Go loop costs
// from what the Go process does (BENCHMARKS.md, "How perf-compare runs");
// -loop cgo runs them in Go with the C loop's own post and poll, one cgo
// call each, to tell the crossings from what hand/ adds to them (with -e,
// each of its polls
// waits in C as hand.Poller.WaitThread does, with perftest's -e steps, and
// returns at every wake that finds completions). -e waits for a completion
// event after a poll that found nothing instead of busy-polling, as
// perftest's -e, which is what lets client, server and rxe share one CPU
// (make perf-compare): by default in the channel's read on the goroutine's thread
// (-wait thread, hand.Poller.WaitThread; the send_bw server's waits return
// once they hold 16 receives, -wait-min N, hand.Poller.WaitThreadAtLeast),
// or parked on the netpoller (-wait netpoll, hand.CQ.Wait), or on the thread
// with the netpoll loop's steps (-wait cq-thread, hand.CQ.WaitThread). With -wait netpoll the process restarts itself
// first with the runtime's sysmon kept awake (sysmon.go; -sysmon-nap leaves
// it the runtime's default). With -e it prints how it waited (" wait:
// thread ...", " wait: cq-thread ..." or " wait: netpoll ...") and its sysmon (" sysmon: awake ..."
// or " sysmon: sleeps ..."). -gomaxprocs N sets the Go runtime's Ps, and
// the report says so (" runtime: GOMAXPROCS N"); -lock-thread locks the
// loop's goroutine to its OS thread, and the report says so too
// (" thread: ...").
package perf

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/internal/getopt"
	"github.com/goverbs/goverbs/internal/perf/loopallocs"
)

// Mode is what is measured.
type Mode string

const (
	SendBW  Mode = "send_bw"
	WriteBW Mode = "write_bw"
	ReadBW  Mode = "read_bw"
	SendLat Mode = "send_lat"
)

// Config is the command line.
type Config struct {
	Mode     Mode
	Server   string // host to connect to; "" for the server
	Port     int
	Device   string
	IBPort   int
	GIDIndex int
	Size     int
	Iters    int
	PostList int
	CQMod    int
	TxDepth  int
	RxDepth  int
	Loop     Loop // the bandwidth loops' language: GoLoop, CLoop or CgoLoop
	Spin     int  // polls per cgo call of the Go loops (hand.Poller.PollSpin)
	Events   bool // wait for completions on a completion channel instead of busy-polling
	Wait     Wait // with Events, how: ThreadWait, CQThreadWait or NetpollWait
	// WaitMin is, with Events and ThreadWait, how many receives the
	// send_bw server's waits return with, at least
	// (hand.Poller.WaitThreadAtLeast; see serverWaitMin): 1 returns to Go
	// at every wake, as perftest's loop does.
	WaitMin int
	// SysmonNap leaves the Go runtime's sysmon its sleep while the process
	// idles, as every Go program has it by default; without it, -e -wait
	// netpoll restarts the process with sysmon kept awake (sysmon.go).
	SysmonNap bool
	// GoMaxProcs sets the Go runtime's Ps (runtime.GOMAXPROCS) when
	// above 0. On a one-CPU VM Go has one P, and with none idle sysmon
	// takes it from any cgo call that outlasts its 20 us tick; with 2 it
	// has an idle P, as on a host with more CPUs, and leaves such a call
	// alone for 10 ms (BENCHMARKS.md, "Known gaps").
	GoMaxProcs int
	// LockThread runs the loop's goroutine locked to its OS thread
	// (runtime.LockOSThread), as perftest's loop has its one thread. With
	// two Ps and a loop that blocks in cgo calls (-e -wait thread), an
	// unlocked goroutine moves between threads whenever such a call loses
	// its P, and send_lat 64 B ran at one of two speeds a run, 12% apart;
	// locked, 20 runs of 20 took the faster, and the two-P event rows became
	// the one-P rows, send_bw's gain from the idle P gone with the move.
	// With one P it costs up to 1%: whenever another goroutine (the watch,
	// a timer) takes the P, the P is handed between threads and back.
	LockThread bool

	CPUProfile string // file for a CPU profile of the timed part; "" for none
	Trace      string // file for a runtime execution trace of the timed part
	LatDump    string // send_lat: file for each round trip's start and length
}

// Wait is how -e waits for a completion event (-wait).
type Wait string

const (
	// ThreadWait blocks the goroutine's thread in the channel's read
	// (hand.Poller.WaitThread): one cgo call and two syscalls a wake (the
	// event's read, the arm), as perftest makes (its blocking read, the
	// arm); three where the device refuses the channel's kick and the
	// wait blocks in epoll_wait before the read.
	ThreadWait Wait = "thread"
	// NetpollWait parks the goroutine on Go's netpoller (hand.CQ.Wait):
	// no thread held, five syscalls a wake and the scheduler's run of the
	// goroutine.
	NetpollWait Wait = "netpoll"
	// CQThreadWait blocks the thread in the channel's read as ThreadWait
	// does, with the loop of NetpollWait in Go: hand.CQ.WaitThread, then
	// the arm and the poll, a cgo call each, after every event: what a
	// program that polls and arms itself pays for a wait on the thread.
	CQThreadWait Wait = "cq-thread"
)

// perftest's bounds on -s (1 to UINT_MAX/2) and -n (MIN_ITER, MAX_ITER).
const (
	maxSize  = math.MaxUint32 / 2
	minIters = 5
	maxIters = 1 << 32
)

// perftest's CQ moderation: DEF_CQ_MOD, and MSG_SIZE_CQ_MOD_LIMIT, the
// message size above which it signals every WR unless told otherwise.
const (
	defCQMod       = 100
	cqModSizeLimit = 8192
)

// ParseArgs parses the command line.
func ParseArgs(args []string) (Config, error) {
	cfg := Config{Port: 18515, IBPort: 1, GIDIndex: -1, PostList: 1, CQMod: defCQMod, TxDepth: 128, RxDepth: 512, Spin: 16, WaitMin: pollerSize}
	fs := flag.NewFlagSet("goverbs-perf", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var mode string
	fs.StringVar(&mode, "t", string(SendBW), "send_bw, write_bw, read_bw or send_lat")
	// perftest's letters and, beside them, its long names (getopt_long's,
	// so --iter is --iters).
	for _, n := range []string{"d", "ib-dev"} {
		fs.StringVar(&cfg.Device, n, "", "device")
	}
	for _, f := range []struct {
		short, long string
		p           *int
		usage       string
	}{
		{"i", "ib-port", &cfg.IBPort, "port of the device"},
		{"x", "gid-index", &cfg.GIDIndex, "GID index"},
		{"s", "size", &cfg.Size, "message size"},
		{"n", "iters", &cfg.Iters, "iterations"},
		{"p", "port", &cfg.Port, "TCP port"},
		{"l", "post_list", &cfg.PostList, "post list"},
		{"Q", "cq-mod", &cfg.CQMod, "CQ moderation: one signaled WR in Q (default 100; 1 above 8192 bytes without -e, the post list with -l, as perftest)"},
	} {
		fs.IntVar(f.p, f.short, *f.p, f.usage)
		fs.IntVar(f.p, f.long, *f.p, f.usage)
	}
	fs.IntVar(&cfg.TxDepth, "tx-depth", cfg.TxDepth, "send queue depth")
	fs.IntVar(&cfg.RxDepth, "rx-depth", cfg.RxDepth, "receive queue depth")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the timed part to `file`")
	fs.StringVar(&cfg.Trace, "trace", "", "write a runtime execution trace of the timed part to `file`")
	fs.StringVar(&cfg.LatDump, "lat-dump", "", "send_lat: write each round trip to `file`, one line of its start (CLOCK_MONOTONIC, ns) and its length (ns)")
	loop := string(GoLoop)
	fs.StringVar(&loop, "loop", loop, "go; c: the bandwidth loops written in C in this process (one cgo call a run), to price the Go loop; "+
		"or cgo: the loops in Go with the C loop's post and poll, one cgo call each, to price the crossings apart from hand/ "+
		"(with -e, each poll waits in C as hand.Poller.WaitThread does, blocked in the channel's read, and returns at every wake that finds completions)")
	fs.IntVar(&cfg.Spin, "spin", cfg.Spin, "polls of an empty CQ per cgo call in the Go loops; 1 crosses into C for each poll")
	for _, n := range []string{"e", "events"} {
		fs.BoolVar(&cfg.Events, n, false, "after a poll that found nothing, wait for a completion event (-wait says how), then ibv_req_notify_cq, instead of busy-polling, as perftest's -e")
	}
	wait := string(ThreadWait)
	fs.StringVar(&wait, "wait", wait, "with -e: thread, blocked in the channel's read on the goroutine's thread (hand.Poller.WaitThread); cq-thread, blocked so too, in hand.CQ.WaitThread, then arming and polling from Go; or netpoll, parked on Go's netpoller (hand.CQ.Wait)")
	fs.IntVar(&cfg.WaitMin, "wait-min", cfg.WaitMin, "with -e -wait thread: the send_bw server's waits return once they hold this many receives "+
		"(hand.Poller.WaitThreadAtLeast), but its first, which starts its clock, and none for more than are left or than half of those posted; "+
		"1 returns to Go at every wake, as perftest's loop does; 1 to "+strconv.Itoa(pollerSize))
	fs.BoolVar(&cfg.SysmonNap, "sysmon-nap", false, "with -e -wait netpoll, let the Go runtime's sysmon thread sleep while the process idles, as Go programs do by default; "+
		"without it, goverbs-perf restarts itself with GODEBUG=schedtrace=2147483647, which keeps sysmon napping instead, so that a wake does not also wake it")
	fs.IntVar(&cfg.GoMaxProcs, "gomaxprocs", 0, "the Go runtime's Ps (runtime.GOMAXPROCS); 0 leaves Go's default, one per CPU it may use")
	fs.BoolVar(&cfg.LockThread, "lock-thread", false, "run the loop's goroutine locked to its OS thread (runtime.LockOSThread), as perftest's loop has its one thread")
	for _, n := range []string{"F", "CPU-freq"} {
		fs.Bool(n, false, "ignored (perftest's CPU frequency check)")
	}
	// As perftest's getopt_long: -e -l8, --iter 10, the host anywhere.
	if err := getopt.Parse(fs, args); err != nil {
		return cfg, err
	}
	hosts := fs.Args()
	cfg.Mode = Mode(mode)
	cfg.Loop = Loop(loop)
	cfg.Wait = Wait(wait)
	lat := cfg.Mode == SendLat
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	set["s"] = set["s"] || set["size"]
	set["n"] = set["n"] || set["iters"]
	set["Q"] = set["Q"] || set["cq-mod"]
	// The defaults stand for absent flags only: an explicit -s 0 or -n 0
	// is refused below, as perftest refuses it.
	if !set["s"] {
		cfg.Size = map[bool]int{false: 65536, true: 2}[lat]
	}
	if !set["n"] {
		cfg.Iters = map[bool]int{false: 5000, true: 1000}[lat]
	}
	switch {
	case !slices.Contains([]Mode{SendBW, WriteBW, ReadBW, SendLat}, cfg.Mode):
		return cfg, fmt.Errorf("-t %q: one of send_bw, write_bw, read_bw, send_lat", mode)
	case !slices.Contains([]Loop{GoLoop, CLoop, CgoLoop}, cfg.Loop):
		return cfg, fmt.Errorf("-loop %q: go, c or cgo", loop)
	case cfg.Wait != ThreadWait && cfg.Wait != CQThreadWait && cfg.Wait != NetpollWait:
		return cfg, fmt.Errorf("-wait %q: thread, cq-thread or netpoll", wait)
	case cfg.Loop != GoLoop && cfg.Mode == SendLat:
		return cfg, fmt.Errorf("-loop %s: the bandwidth modes only (send_bw, write_bw, read_bw)", cfg.Loop)
	case cfg.Loop == CLoop && cfg.Events:
		return cfg, errors.New("-loop c: busy-polling only, not with -e")
	case cfg.Loop == CgoLoop && cfg.Events && cfg.Wait != ThreadWait:
		return cfg, errors.New("-loop cgo -e: waits on the thread only, not with -wait netpoll")
	case len(hosts) > 1:
		return cfg, fmt.Errorf("one host at most, got %q", hosts)
	case cfg.WaitMin < 1 || cfg.WaitMin > pollerSize:
		return cfg, fmt.Errorf("-wait-min %d: from 1 to %d, the completions a poll holds", cfg.WaitMin, pollerSize)
	case cfg.GoMaxProcs < 0:
		return cfg, fmt.Errorf("-gomaxprocs %d: 0 for Go's default, or the Ps to run with", cfg.GoMaxProcs)
	case cfg.Size < 1 || cfg.Size > maxSize:
		return cfg, fmt.Errorf("-s %d: the message size must be between 1 and %d (perftest's bounds, within an SGE's 32-bit length)", cfg.Size, maxSize)
	case cfg.Iters < minIters || int64(cfg.Iters) > maxIters:
		return cfg, fmt.Errorf("-n %d: the iterations must be between %d and %d (perftest's bounds)", cfg.Iters, minIters, maxIters)
	case cfg.PostList < 1 || cfg.CQMod < 1 || cfg.TxDepth < 1 || cfg.RxDepth < 2 || cfg.Spin < 1:
		return cfg, errors.New("-l, -Q, -spin and -tx-depth must be positive, -rx-depth at least 2")
	}
	// -Q's default, as perftest's force_dependecies sets it, in its order:
	// 100 (DEF_CQ_MOD), but every WR signaled above 8192 bytes
	// (MSG_SIZE_CQ_MOD_LIMIT) without -e (perftest keeps moderation with
	// events, and for UD, which this does not run), then capped at the send
	// queue, then, with a post list, the list's last WR signaled. send_lat
	// posts one signaled send at a time, whatever -l and -Q say.
	if !set["Q"] && cfg.Size > cqModSizeLimit && !cfg.Events {
		cfg.CQMod = 1 // DISABLED_CQ_MOD_VALUE
	}
	cfg.CQMod = min(cfg.CQMod, cfg.TxDepth)
	if cfg.PostList > 1 && !set["Q"] {
		cfg.CQMod = cfg.PostList
	}
	if !lat {
		if err := cfg.sendPlan().check(); err != nil {
			return cfg, err
		}
	}
	if len(hosts) == 1 {
		cfg.Server = hosts[0]
	}
	return cfg, nil
}

// Main runs the command and returns its exit status. It is the process's:
// with -e -wait netpoll, and without -sysmon-nap, it first restarts the process (os.Args)
// with sysmon kept awake (sysmonAwakeEnv), unless GODEBUG sets schedtrace.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "goverbs-perf: %v\n", err)
		return 1
	}
	if env, restart := sysmonAwakeEnv(cfg, os.Environ()); restart {
		return restartWithEnv(env, stderr)
	}
	if err := Run(cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "goverbs-perf: %v\n", err)
		return 1
	}
	return 0
}

const rule = "---------------------------------------------------------------------------------------"

// peer is what the sides exchange: the QP's endpoint and the buffer.
type peer struct {
	hand.Endpoint
	Addr uint64
	RKey uint32
}

const peerSize = hand.EndpointSize + 12

func (p peer) marshal() []byte {
	b, _ := p.Endpoint.MarshalBinary()
	b = binary.BigEndian.AppendUint64(b, p.Addr)
	return binary.BigEndian.AppendUint32(b, p.RKey)
}

// unmarshal decodes the peer's peerSize bytes. They are untrusted: the
// endpoint is checked by Endpoint.UnmarshalBinary, and the buffer (the
// target of the RDMA writes and reads of size bytes) must not wrap the
// address space. The peer's buffer must hold size bytes, which the protocol
// does not carry (both sides run with the same -s, as perftest's do); a
// shorter one fails at the peer's device with a remote access error, never
// touching local memory.
func (p *peer) unmarshal(b []byte, size int) error {
	if len(b) != peerSize {
		return fmt.Errorf("the peer's address is %d bytes, want %d", len(b), peerSize)
	}
	var d peer
	if err := d.Endpoint.UnmarshalBinary(b[:hand.EndpointSize]); err != nil {
		return err
	}
	d.Addr = binary.BigEndian.Uint64(b[hand.EndpointSize:])
	d.RKey = binary.BigEndian.Uint32(b[hand.EndpointSize+8:])
	if size > 0 && d.Addr+uint64(size)-1 < d.Addr {
		return fmt.Errorf("the peer's buffer at %#x cannot hold %d bytes: it wraps the address space", d.Addr, size)
	}
	*p = d
	return nil
}

// Run runs one side of one test.
func Run(cfg Config, out io.Writer) (err error) {
	if cfg.LockThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	if cfg.GoMaxProcs > 0 {
		runtime.GOMAXPROCS(cfg.GoMaxProcs)
	}
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	allocs := newAllocCounter()
	dev, err := hand.Open(cfg.Device)
	if err != nil {
		return err
	}
	closers = append(closers, dev.Close)
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	closers = append(closers, pd.Close)
	access := hand.AccessLocalWrite | peerAccess(cfg)
	mr, err := pd.Alloc(cfg.Size, access)
	if err != nil {
		return err
	}
	closers = append(closers, mr.Close)
	var cqOpts hand.CQOptions
	if cfg.Events {
		if cqOpts.Channel, err = dev.NewCompChannel(); err != nil {
			return err
		}
		closers = append(closers, cqOpts.Channel.Close)
		if cfg.Wait != NetpollWait {
			// Its kick, made here rather than in the timed loop's
			// first wait, which would count it as a round trip's.
			if err := cqOpts.Channel.PrepareWaitThread(); err != nil {
				return err
			}
		}
	}
	cq, err := dev.NewCQ(cfg.TxDepth+cfg.RxDepth, cqOpts)
	if err != nil {
		return err
	}
	closers = append(closers, cq.Close)
	if cfg.Events {
		// Armed before the first post, as perftest's -e (engine.poll).
		if err := cq.RequestNotify(false); err != nil {
			return err
		}
	}
	qp, err := pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: cq,
		Caps: hand.QPCaps{MaxSendWR: cfg.TxDepth, MaxRecvWR: cfg.RxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	closers = append(closers, qp.Close)
	e, err := newEngine(cfg, qp, cq, mr)
	if err != nil {
		return err
	}
	closers = append(closers, func() error { e.free(); return nil })

	var local peer
	local.QPN, local.PSN, local.Addr, local.RKey = qp.Num(), hand.RandomPSN(), mr.Addr(), mr.RKey()
	pa, err := dev.QueryPort(cfg.IBPort)
	if err != nil {
		return err
	}
	local.LID = pa.LID
	if cfg.GIDIndex >= 0 {
		g, err := dev.QueryGID(cfg.IBPort, cfg.GIDIndex)
		if err != nil {
			return fmt.Errorf("can't read sgid of index %d: %w", cfg.GIDIndex, err)
		}
		local.GID = g
	}
	if err := qp.ToInit(hand.InitAttr{Port: cfg.IBPort, Access: access}); err != nil {
		return err
	}
	// Receives go up before the peer can send.
	if cfg.Mode == SendBW && cfg.Server == "" || cfg.Mode == SendLat {
		if err := e.fillRecv(); err != nil {
			return err
		}
	}
	conn, err := sideChannel(cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write(local.marshal()); err != nil {
		return sideErr(err, "it read our address")
	}
	buf := make([]byte, peerSize)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return sideErr(err, "it sent its address")
	}
	var remote peer
	if err := remote.unmarshal(buf, cfg.Size); err != nil {
		return err
	}
	path := hand.Path{Port: cfg.IBPort, DLID: remote.LID}
	if !remote.GID.IsZero() {
		path.DGID, path.SGIDIndex = remote.GID, cfg.GIDIndex
	}
	// As perftest: as many RDMA reads in flight as the device allows
	// ("Outstand reads"), where hand's default stops at 16; read_bw is
	// bound by it.
	da, err := dev.QueryDevice()
	if err != nil {
		return err
	}
	if err := qp.ToRTR(hand.RTRAttr{Path: path, DestQPN: remote.QPN, RQPSN: remote.PSN, MaxDestRDAtomic: int(da.MaxQPRDAtom)}); err != nil {
		return err
	}
	if err := qp.ToRTS(hand.RTSAttr{SQPSN: local.PSN, MaxRDAtomic: int(da.MaxQPInitRDAtom)}); err != nil {
		return err
	}
	e.raddr, e.rkey = remote.Addr, remote.RKey
	// A side that runs a loop ends it when the peer goes away (peerWatch);
	// a write_bw or read_bw server only waits in its end sync, which a
	// closed side channel ends.
	var w *peerWatch
	if cfg.Mode == SendLat || cfg.Mode == SendBW || cfg.Server != "" {
		w = newPeerWatch(conn, e.progressed, qp.ToError)
		defer w.release() // before conn.Close, which ends its read
	}
	// Before the count starts: the restore it returns is allocated.
	defer quietScavenger()()
	// Counted from before the first sync, so that neither side collects
	// garbage while the other one runs.
	allocs.start()
	if err := sync(conn, buf[:1], "the start sync"); err != nil {
		return err
	}

	var elapsed time.Duration
	// Both stop after the loop, or on the way out when the loop fails.
	stopProfile, err := record(cfg.CPUProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	stopTrace, err := record(cfg.Trace, trace.Start, trace.Stop)
	if err != nil {
		return err
	}
	defer stopTrace()
	w.start()
	var loopErr error
	switch {
	case cfg.Mode == SendLat:
		loopErr = e.latency(cfg.Server != "")
	case cfg.Server != "":
		elapsed, loopErr = e.bwClient()
	case cfg.Mode == SendBW:
		elapsed, loopErr = e.bwServer()
	}
	if err := w.stop(loopErr); err != nil {
		return err
	}
	// The profile and the trace end with the loop, before the counter's
	// collections and stack walks, which are not the loop's; what the
	// profiler and the tracer allocate stopping is not counted (allocs.go).
	stopProfile()
	stopTrace()
	// The count ends after the end sync, as it starts before the start
	// sync, so that neither side collects garbage while the other's loop
	// runs: the side that ends first would otherwise run two collections
	// while its peer waits for the CPU to take its last completion (the
	// answering side's last message in send_lat, the sender's last
	// acknowledged sends), and on one CPU the peer timed them.
	if err := w.endSync(conn, buf[:1]); err != nil {
		return err
	}
	loopAllocs := allocs.stop()
	switch {
	case cfg.Mode == SendLat:
		reportLat(out, cfg, e.lat)
		reportSends(out, e.sent, e.sendsOut)
		if err := writeLatDump(cfg.LatDump, e.starts, e.lat); err != nil {
			return err
		}
	case cfg.Server != "" || cfg.Mode == SendBW:
		reportBW(out, cfg, elapsed, e.peak)
	default:
		fmt.Fprintln(out, rule)
		fmt.Fprintf(out, " %s server: the client reports\n", cfg.Mode)
		fmt.Fprintln(out, rule)
	}
	if cfg.Events {
		reportWait(out, cfg)
		reportSysmon(out)
	}
	if cfg.GoMaxProcs > 0 {
		fmt.Fprintf(out, " runtime: GOMAXPROCS %d (-gomaxprocs)\n", runtime.GOMAXPROCS(0))
	}
	if cfg.LockThread {
		fmt.Fprintln(out, " thread: the loop's goroutine locked to its OS thread (-lock-thread)")
	}
	loopallocs.Write(out, loopAllocs)
	return nil
}

// record starts a profile or trace into the file path (nothing when path is
// ""), and returns what stops it and closes the file, once however often it
// is called.
func record(path string, start func(io.Writer) error, stop func()) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			stop()
			f.Close()
		}
	}, nil
}

func sideChannel(cfg Config) (net.Conn, error) {
	if cfg.Server != "" {
		return net.Dial("tcp", net.JoinHostPort(cfg.Server, strconv.Itoa(cfg.Port)))
	}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(cfg.Port))
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	return ln.Accept()
}

// syncByte is what sync sends: a package variable, so that sending it does
// not allocate.
var syncByte = []byte{1}

// sync exchanges one byte each way; buf (one byte) receives the peer's.
// step names the sync in its error.
func sync(c net.Conn, buf []byte, step string) error {
	if _, err := c.Write(syncByte); err != nil {
		return sideErr(err, step)
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		return sideErr(err, step)
	}
	return nil
}

// sideErr is the side channel's err, saying what the peer had not done
// yet (before): a peer that exits, failing or stopped, closes its end,
// which reads here as io.EOF, or as a reset when our bytes were left
// unread; a bare "EOF" named neither the step nor the peer.
func sideErr(err error, before string) error {
	why := "it failed or was stopped: see its output"
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the peer closed the side channel before %s (%s)", before, why)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return fmt.Errorf("the peer reset the side channel before %s (%s): %w", before, why, err)
	}
	return fmt.Errorf("the side channel failed before %s: %w", before, err)
}

// reportBW prints perftest's bandwidth table: MB is 2^20 bytes, the
// message rate in millions a second.
func reportBW(out io.Writer, cfg Config, d time.Duration, peak float64) {
	sec := d.Seconds()
	avg := float64(cfg.Size) * float64(cfg.Iters) / sec / (1 << 20)
	fmt.Fprintln(out, rule)
	fmt.Fprintln(out, " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]")
	fmt.Fprintf(out, " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n",
		cfg.Size, cfg.Iters, peak/(1<<20), avg, float64(cfg.Iters)/sec/1e6)
	fmt.Fprintln(out, rule)
}

// writeLatDump writes, when path is not "", one line per round trip: its
// start on CLOCK_MONOTONIC and its length, both in nanoseconds, for
// matching against the kernel's events (goverbs-perfcompare -tails).
func writeLatDump(path string, starts []int64, lat []time.Duration) error {
	if path == "" {
		return nil
	}
	var b []byte
	for i, d := range lat {
		b = strconv.AppendInt(b, starts[i], 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(d), 10)
		b = append(b, '\n')
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("-lat-dump: %w", err)
	}
	return nil
}

// latMeasureTail is how many of the longest round trips perftest leaves
// out of its latency statistics (LAT_MEASURE_TAIL, print_report_lat).
const latMeasureTail = 2

// reportLat prints perftest's latency table from one-way latencies (half
// of each round trip), computed as perftest's print_report_lat computes
// it, so that the two tools' rows compare like for like: over the sorted
// latencies, the median, average and deviation leave out the
// latMeasureTail longest; t_max is the longest of those left out but one
// (perftest prints delta[n-2] of its n); the percentiles are the sorted
// whole at ceil(p*(n-2)). (perftest measures iters-1 intervals between its
// posts; goverbs-perf times each of its iters round trips. perftest's
// deviation truncates each difference to an int; this one does not.)
func reportLat(out io.Writer, cfg Config, lat []time.Duration) {
	us := make([]float64, len(lat))
	for i, d := range lat {
		us[i] = float64(d.Nanoseconds()) / 2e3
	}
	slices.Sort(us)
	n := len(us)
	m := max(1, n-latMeasureTail) // the latencies the statistics keep
	median := us[m/2]
	if (m-1)%2 != 0 {
		median = (us[m/2] + us[m/2-1]) / 2
	}
	var sum, sq float64
	for _, v := range us[:m] {
		sum += v
	}
	avg := sum / float64(m)
	for _, v := range us[:m] {
		sq += (v - avg) * (v - avg)
	}
	at := func(i int) float64 { return us[min(n-1, i)] }
	pct := func(p float64) float64 { return at(int(math.Ceil(p * float64(m)))) }
	fmt.Fprintln(out, rule)
	fmt.Fprintln(out, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
	fmt.Fprintf(out, " %-7d %-10d   %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
		cfg.Size, cfg.Iters, us[0], at(m), median, avg, math.Sqrt(sq/float64(m)), pct(0.99), pct(0.999))
	fmt.Fprintln(out, rule)
}

// reportSends tells how many of send_lat's sends completed before the
// report: all of them, since the loop polls the last one's completion
// before it ends (engine.reapSends).
func reportSends(out io.Writer, posted, pending int) {
	fmt.Fprintf(out, " sends: %d posted, %d completed before the report\n", posted, posted-pending)
}

// peerAccess is the remote access this side's buffer and QP grant the
// peer: the one operation the peer's loop posts to it (the client's writes
// in write_bw, its reads in read_bw, on the server's buffer) and nothing
// else. The rkey goes to the peer with the address either way, as
// perftest's exchange has it, but opens only what the mode uses.
func peerAccess(cfg Config) hand.Access {
	if cfg.Server != "" {
		return 0 // the client's buffer is only ever local to it
	}
	switch cfg.Mode {
	case WriteBW:
		return hand.AccessRemoteWrite
	case ReadBW:
		return hand.AccessRemoteRead
	}
	return 0
}
