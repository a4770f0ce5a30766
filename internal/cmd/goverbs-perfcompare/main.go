// Command goverbs-perfcompare runs perftest's C tools and goverbs-perf side
// by side on one verbs device and prints, per row, the minimum, median and
// maximum of each tool over -reps runs and the Go/C ratio of the medians,
// then one line per row for scripts:
//
//	perf <mode> <size> <c median msg/s> <go median msg/s> <go/c>
//
// It is what `make perf-compare` (on one vCPU under qemu's -icount) and `make
// perf-compare-realtime` run inside the soft-RoCE VM:
//
//	goverbs-perfcompare -perf /path/to/goverbs-perf -d rxe0 -x 1 -a 192.0.2.1
//
// Each run of a row starts the C server and client, then the Go server and
// client (C and Go alternate, so a slow stretch of the host hits both), with
// the same size and iterations and both tools' defaults, which are alike:
// post list 1, and CQ moderation as perftest picks it (one WR in 100
// signaled, every one above 8192 bytes without -e), which goverbs-perf
// follows; it reads the client's result line. The message rate of a
// latency row is 1e6 / t_typical[usec] (the median one-way latency); its
// 99th percentile and maximum are reported beside it, as medians over the
// runs. goverbs-perf also reports the heap allocations of its timed loop:
// any is an error. Under TCG the absolute figures mean nothing; the ratios
// of one boot are the result.
//
// -loop c runs goverbs-perf's bandwidth loops written in C, in the Go
// process (goverbs-perf -loop c), to tell the Go loop's cost from the Go
// process's, and -loop cgo runs them in Go with the C loop's own post and
// poll, one cgo call each, to tell the crossings from hand/. -insns counts instructions instead (make perf-insns,
// insns.go), -tails N explains goverbs-perf's slow send_lat round trips
// (make perf-tails, tails.go), and -profile DIR takes CPU profiles of
// goverbs-perf's rows (make perf-profile, profile.go). On the host, -agree
// PCT LOG... says whether complete perf-compare runs agree within PCT
// percent a row (agree.go).
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/cmd/goverbs-perfcompare/insns"
	"github.com/goverbs/goverbs/internal/listenwait"
	"github.com/goverbs/goverbs/internal/perf/loopallocs"
)

// result is a client's result row.
type result struct {
	msgRate  float64 // messages a second
	mbps     float64 // MB/sec (2^20), bandwidth modes
	p99, max float64 // latency modes: 99th percentile and maximum, usec
	switches float64 // context switches in the whole guest while the client ran
	row      string  // the row as printed
}

// parseResult reads the row after perftest's "#bytes" header; the Go tool
// prints the same table. A row whose message rate (a bandwidth row's
// MsgRate, a latency row's t_typical) is not a positive finite number, or
// whose latency tails are not finite and at least 0, is an error naming
// tool and the row: a rate of 0 or NaN would make every ratio of the table
// NaN or Inf.
func parseResult(tool, out string, lat bool) (result, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if !strings.Contains(sc.Text(), "#bytes") || !sc.Scan() {
			continue
		}
		f := strings.Fields(sc.Text())
		col := func(i int, name string, positive bool) (float64, error) {
			if i >= len(f) {
				return 0, fmt.Errorf("%s: result row %q: no column %d (%s)", tool, sc.Text(), i+1, name)
			}
			x, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return 0, fmt.Errorf("%s: result row %q: %s: %w", tool, sc.Text(), name, err)
			}
			if !finitePositive(x) && (positive || x != 0) {
				want := "a finite number, at least 0"
				if positive {
					want = "a positive number"
				}
				return 0, fmt.Errorf("%s: result row %q: %s %s is not %s", tool, sc.Text(), name, f[i], want)
			}
			return x, nil
		}
		if lat {
			typical, err := col(4, "t_typical[usec]", true) // the median
			if err != nil {
				return result{}, err
			}
			tmax, err1 := col(3, "t_max[usec]", false)
			p99, err2 := col(7, "99% percentile[usec]", false)
			if err := errors.Join(err1, err2); err != nil {
				return result{}, err
			}
			return result{msgRate: 1e6 / typical, p99: p99, max: tmax, row: sc.Text()}, nil
		}
		avg, err := col(3, "BW average[MB/sec]", false)
		if err != nil {
			return result{}, err
		}
		mpps, err := col(4, "MsgRate[Mpps]", true)
		if err != nil {
			return result{}, err
		}
		return result{msgRate: mpps * 1e6, mbps: avg, row: sc.Text()}, nil
	}
	return result{}, fmt.Errorf("%s: no result row (no #bytes header)", tool)
}

// ratioText is the ratio x in %*.2f, or "-" where it is not a finite
// number (a tool without runs, a latency tail of 0).
func ratioText(x float64, width int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return fmt.Sprintf("%*s", width, "-")
	}
	return fmt.Sprintf("%*.2f", width, x)
}

type options struct {
	perf, device, gid, addr string
	sizes                   []int
	bwIters, latIters       int
	maxBytes                int
	port, reps              int
	verbose                 bool
	modes                   []string
	insns                   string // directory for -insns; "" for off
	tails                   int    // runs for -tails; 0 for off
	profile                 string // directory for -profile; "" for off
	tailsStacks             bool   // -tails also records the wakeups' call chains
	loop                    string // goverbs-perf -loop: go, c for its loops in C, or cgo
	spin                    int    // goverbs-perf -spin; 0 for its default
	events                  bool   // both tools wait on completion events (-e)
	sysmonNap               bool   // goverbs-perf -sysmon-nap: the runtime's default sysmon with -e -wait netpoll
	wait                    string // goverbs-perf -wait with -e; "" for its default (thread)
	waitMin                 int    // goverbs-perf -wait-min; 0 for its default
	gomaxprocs              int    // goverbs-perf -gomaxprocs; 0 for Go's default
	lockThread              bool   // goverbs-perf -lock-thread
}

// toolArgs are the arguments of tool ("c": perftest's ib_<mode>, "go":
// goverbs-perf) for one run of n messages of size bytes in mode.
func (o options) toolArgs(tool, mode string, size, n int) []string {
	args := []string{"-d", o.device, "-x", o.gid, "-s", strconv.Itoa(size), "-n", strconv.Itoa(n)}
	if o.events {
		args = append(args, "-e")
	}
	if tool != "go" {
		if o.insns != "" && !latMode(mode) {
			// -N: no peak. perftest's bandwidth report searches every
			// (post, completion) pair for the peak, after its timed
			// loop: iterations^2 / (2 x CQ moderation) divisions, which
			// -insns's difference of two run lengths would count as
			// 1,400 instructions a message at 5,000 and 20,000 (700 at
			// 2,500 and 10,000). Its loop then skips one rdtsc a post.
			args = append(args, "-N")
		}
		return append([]string{"-F"}, args...)
	}
	// goverbs-perf's own: its mode is a flag, perftest's the program.
	args = append(args, "-t", mode, "-loop", o.loop)
	if o.spin > 0 {
		args = append(args, "-spin", strconv.Itoa(o.spin))
	}
	if o.wait != "" {
		args = append(args, "-wait", o.wait)
	}
	if o.waitMin > 0 {
		args = append(args, "-wait-min", strconv.Itoa(o.waitMin))
	}
	if o.sysmonNap {
		args = append(args, "-sysmon-nap")
	}
	if o.gomaxprocs > 0 {
		args = append(args, "-gomaxprocs", strconv.Itoa(o.gomaxprocs))
	}
	if o.lockThread {
		args = append(args, "-lock-thread")
	}
	return args
}

func main() {
	var o options
	var sizes string
	flag.StringVar(&o.perf, "perf", "goverbs-perf", "the goverbs-perf binary")
	flag.StringVar(&o.device, "d", os.Getenv("RXE_DEVICE"), "device")
	flag.StringVar(&o.gid, "x", os.Getenv("RXE_GID_INDEX"), "GID index")
	flag.StringVar(&o.addr, "a", os.Getenv("RXE_ADDR"), "this host's address on the device")
	flag.StringVar(&sizes, "sizes", "64,4096,65536", "message sizes")
	flag.IntVar(&o.bwIters, "bw-iters", 20000, "iterations of the bandwidth modes")
	flag.IntVar(&o.latIters, "lat-iters", 5000, "iterations of send_lat")
	flag.IntVar(&o.maxBytes, "max-bytes", 128<<20, "fewer iterations where a row would move more than this")
	flag.IntVar(&o.port, "port", 19100, "first TCP port (one per run)")
	flag.IntVar(&o.reps, "reps", 5, "runs of each tool per row, alternating")
	flag.BoolVar(&o.verbose, "v", false, "print every result row")
	flag.StringVar(&o.loop, "loop", "go", "goverbs-perf's -loop: go; c to run its bandwidth loops in C in the Go process (make perf-compare); "+
		"cgo to run them in Go with the C loop's post and poll, a cgo call each")
	flag.IntVar(&o.spin, "spin", 0, "goverbs-perf's -spin (polls of an empty CQ per cgo call); 0 leaves its default")
	flag.BoolVar(&o.events, "events", false, "both tools wait for completions on a completion channel (-e) instead of busy-polling: "+
		"what lets client and server share one vCPU (make perf-compare)")
	flag.StringVar(&o.wait, "wait", "", "goverbs-perf's -wait with -events: thread (its default: blocked in the channel's read, hand.Poller.WaitThread) "+
		"cq-thread (blocked so too, in hand.CQ.WaitThread, arming and polling from Go) or netpoll (parked on the netpoller, hand.CQ.Wait)")
	flag.IntVar(&o.waitMin, "wait-min", 0, "goverbs-perf's -wait-min with -events -wait thread: the receives its send_bw server's waits return with, at least; 0 leaves its default (16), 1 returns at every wake as perftest's loop does")
	flag.BoolVar(&o.lockThread, "lock-thread", false, "goverbs-perf's -lock-thread: its loop's goroutine locked to its OS thread")
	flag.IntVar(&o.gomaxprocs, "gomaxprocs", 0, "goverbs-perf's -gomaxprocs: the Go runtime's Ps; 0 leaves Go's default (1 on a one-vCPU VM, where 2 gives the runtime an idle P, as on a host with more CPUs)")
	flag.BoolVar(&o.sysmonNap, "sysmon-nap", false, "goverbs-perf's -sysmon-nap: with -events -wait netpoll, the Go runtime's sysmon sleeps while the process idles, "+
		"as by default, instead of being kept awake")
	modes := flag.String("modes", "send_bw,write_bw,read_bw,send_lat", "modes to run")
	flag.StringVar(&o.insns, "insns", "", "count instructions instead (make perf-insns): mark each run for qemu's insncount plugin, "+
		"running each tool at the iterations and twice them, and write the runs, the tools' maps and kallsyms to `DIR`")
	flag.IntVar(&o.tails, "tails", 0, "explain send_lat's slow round trips instead (make perf-tails): run goverbs-perf `N` times a size "+
		"under perf record and name, for each round trip over 3 times the median, the likeliest cause among the scheduler's events")
	flag.StringVar(&o.profile, "profile", "", "profile goverbs-perf instead (make perf-profile): run it once a row, the client and "+
		"(in send_bw and send_lat) the server each writing a CPU profile of its timed part to `DIR`")
	flag.BoolVar(&o.tailsStacks, "tails-stacks", false, "with -tails: also record each wakeup's call chain (sched_waking, frame pointers), "+
		"count the tool's threads waking the tool's by the waker's chain, and show the chains within the longest round trips; "+
		"perf's work per wakeup makes the round trips slower")
	report := flag.String("insns-report", "", "on the host, after a -insns run: print the instructions per message of each tool from `DIR` "+
		"(with the plugin's snaps.txt in it)")
	top := flag.Int("insns-top", 25, "with -insns-report: how many functions to list per row")
	filter := flag.String("insns-filter", "", "with -insns-report: list only functions whose region and name contain `TEXT`")
	agreePct := flag.Float64("agree", 0, "on the host: read the perf-compare logs named after the flags and print each row's Go/C in each; "+
		"fail if a row's ratios are more than `PCT` percent apart, or a log lacks a row")
	flag.Parse()
	o.modes = strings.Split(*modes, ",")
	if *agreePct > 0 {
		if err := agree(os.Stdout, flag.Args(), *agreePct/100); err != nil {
			fmt.Fprintf(os.Stderr, "goverbs-perfcompare: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *report != "" {
		if err := printInsns(os.Stdout, *report, *top, *filter); err != nil {
			fmt.Fprintf(os.Stderr, "goverbs-perfcompare: %v\n", err)
			os.Exit(1)
		}
		return
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "goverbs-perfcompare: -sizes: %v\n", err)
			os.Exit(2)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.loop != "go" && (o.loop != "c" && o.loop != "cgo" || slices.ContainsFunc(o.modes, latMode) || o.loop == "c" && o.events) {
		fmt.Fprintf(os.Stderr, "goverbs-perfcompare: -loop %q: go, or c or cgo with the bandwidth modes only, c without -events\n", o.loop)
		os.Exit(2)
	}
	if o.device == "" || o.gid == "" || o.addr == "" {
		fmt.Fprintln(os.Stderr, "goverbs-perfcompare: need -d, -x and -a (internal/cmd/rxevm sets RXE_DEVICE, RXE_GID_INDEX, RXE_ADDR)")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "goverbs-perfcompare: %v\n", err)
		os.Exit(1)
	}
}

type row struct {
	mode  string
	size  int
	iters int      // messages a run
	c, g  []result // every run, in order
}

// spread is the minimum, median and maximum of xs (the mean of the middle
// two for an even count).
type spread struct{ min, med, max float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	return spread{min: s[0], med: (s[(n-1)/2] + s[n/2]) / 2, max: s[n-1]}
}

func field(rs []result, f func(result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// latMode says whether mode is a latency mode (send_lat), whose rate is
// 1e6 / its median one-way time, rather than a bandwidth mode (*_bw).
func latMode(mode string) bool { return mode == "send_lat" }

func (r row) lat() bool { return latMode(r.mode) }

// iters is a row's iterations: -bw-iters or -lat-iters, fewer where they
// would move more than -max-bytes.
func (o options) iters(mode string, size int) int {
	n := o.bwIters
	if latMode(mode) {
		n = o.latIters
	}
	if size > 0 && o.maxBytes/size < n {
		n = max(o.maxBytes/size, 1)
	}
	return n
}

// ratio is Go's median message rate over C's.
func (r row) ratio() float64 {
	rate := func(x result) float64 { return x.msgRate }
	return spreadOf(field(r.g, rate)).med / spreadOf(field(r.c, rate)).med
}

// ratioText is ratio in %*.2f, or "-" where it is not a number.
func (r row) ratioText(width int) string { return ratioText(r.ratio(), width) }

func run(o options) error {
	var rows []row
	port := o.port
	if o.insns != "" {
		return runInsns(o)
	}
	if o.tails > 0 {
		return runTails(o)
	}
	if o.profile != "" {
		return runProfile(o)
	}
	for _, mode := range o.modes {
		for _, size := range o.sizes {
			iters := o.iters(mode, size)
			r := row{mode: mode, size: size, iters: iters}
			cArgs, goArgs := o.toolArgs("c", mode, size, iters), o.toolArgs("go", mode, size, iters)
			for range max(o.reps, 1) {
				c, err := pair(mode, "ib_"+mode, o.addr, cArgs, sideArgs{}, port, "")
				if err != nil {
					return fmt.Errorf("perftest %s %d: %w", mode, size, err)
				}
				port++
				g, err := pair(mode, o.perf, o.addr, goArgs, sideArgs{}, port, "")
				if err != nil {
					return fmt.Errorf("goverbs-perf %s %d: %w", mode, size, err)
				}
				port++
				if o.verbose {
					fmt.Printf("  C : %s\n  Go: %s\n", strings.TrimSpace(c.row), strings.TrimSpace(g.row))
				}
				r.c, r.g = append(r.c, c), append(r.g, g)
			}
			fmt.Printf("ran %-8s %6d B: %d runs each, Go/C %s\n", mode, size, len(r.c), r.ratioText(0))
			rows = append(rows, r)
		}
	}
	printTable(os.Stdout, rows)
	return nil
}

// printTable prints the table of message rates, the latency rows' tails,
// and the perf lines.
func printTable(w io.Writer, rows []row) {
	rate := func(x result) float64 { return x.msgRate }
	fmt.Fprintf(w, "\nmessage rate, msg/s: min / median / max of each tool; Go/C is the ratio of the medians\n")
	fmt.Fprintf(w, "%-9s %6s %28s %28s %6s\n", "mode", "bytes", "C", "Go", "Go/C")
	for _, r := range rows {
		c, g := spreadOf(field(r.c, rate)), spreadOf(field(r.g, rate))
		fmt.Fprintf(w, "%-9s %6d %8.0f / %8.0f / %8.0f %8.0f / %8.0f / %8.0f %s\n",
			r.mode, r.size, c.min, c.med, c.max, g.min, g.med, g.max, r.ratioText(6))
	}
	tails := false
	for _, r := range rows {
		if !r.lat() {
			continue
		}
		if !tails {
			fmt.Fprintf(w, "\nlatency tails, usec: median over the runs of each run's 99th percentile and maximum\n")
			fmt.Fprintf(w, "%-9s %6s %10s %10s %6s %10s %10s %6s\n", "mode", "bytes", "C p99", "Go p99", "Go/C", "C max", "Go max", "Go/C")
			tails = true
		}
		med := func(rs []result, f func(result) float64) float64 { return spreadOf(field(rs, f)).med }
		p99 := func(x result) float64 { return x.p99 }
		tmax := func(x result) float64 { return x.max }
		cp, gp, cm, gm := med(r.c, p99), med(r.g, p99), med(r.c, tmax), med(r.g, tmax)
		fmt.Fprintf(w, "%-9s %6d %10.2f %10.2f %s %10.2f %10.2f %s\n", r.mode, r.size, cp, gp, ratioText(gp/cp, 6), cm, gm, ratioText(gm/cm, 6))
	}
	// Context switches are how the tools' threads and the kernel's
	// (ksoftirqd running rxe's tasklets) take turns: a switch under TCG
	// costs tens of microseconds, and on one vCPU the count per message
	// sets read_bw's rate (BENCHMARKS.md, "Known gaps").
	fmt.Fprintf(w, "\ncontext switches per message, whole guest while the client ran, median over the runs\n")
	fmt.Fprintf(w, "%-9s %6s %8s %8s %8s\n", "mode", "bytes", "C", "Go", "Go-C")
	for _, r := range rows {
		perMsg := func(x result) float64 { return x.switches / float64(r.iters) }
		c, g := spreadOf(field(r.c, perMsg)).med, spreadOf(field(r.g, perMsg)).med
		fmt.Fprintf(w, "%-9s %6d %8.3f %8.3f %+8.3f\n", r.mode, r.size, c, g, g-c)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		c, g := spreadOf(field(r.c, rate)), spreadOf(field(r.g, rate))
		fmt.Fprintf(w, "perf %s %d %.0f %.0f %s\n", r.mode, r.size, c.med, g.med, r.ratioText(0))
	}
}

// sideArgs are arguments that only one side of a pair gets, after the
// arguments both get.
type sideArgs struct{ server, client []string }

// pair runs name as a server and as a client of it on port, each with args
// and then its own of extra, and returns the client's result. When the
// client fails, pair kills the server and returns the client's error with
// both outputs. With maps (for -insns), it writes there the executable
// mappings of both processes as they last were while they ran, and calls
// insns.Marker once the server listens and again once both have ended:
// the wait for the server to listen reads /proc/net/tcp, whose kernel
// work, as large as thousands of messages', would otherwise be counted.
func pair(mode, name, addr string, args []string, extra sideArgs, port int, maps string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args = append(args, "-p", strconv.Itoa(port))
	var sout bytes.Buffer
	srv := exec.CommandContext(ctx, name, slices.Concat(args, extra.server)...)
	srv.Stdout, srv.Stderr = &sout, &sout
	if err := srv.Start(); err != nil {
		return result{}, err
	}
	if err := listenwait.TCP(ctx, port); err != nil {
		srv.Process.Kill()
		srv.Wait()
		return result{}, fmt.Errorf("%w; server output:\n%s", err, sout.String())
	}
	var cout bytes.Buffer
	cli := exec.CommandContext(ctx, name, slices.Concat(args, extra.client, []string{addr})...)
	cli.Stdout, cli.Stderr = &cout, &cout
	switches0, swErr := contextSwitches()
	cerr := cli.Start()
	if cerr == nil {
		if maps != "" {
			insns.Marker() // the client's start counts: goverbs-perf's runtime does work perftest does not
			stop := insns.WatchMaps(maps, srv.Process.Pid, cli.Process.Pid)
			cerr = cli.Wait()
			stop()
			defer insns.Marker() // after the server's Wait
		} else {
			cerr = cli.Wait()
		}
	}
	switches1, swErr1 := contextSwitches()
	if cerr != nil {
		// The server would wait for the client that failed until ctx
		// ends, minutes later: the client's error is the run's.
		srv.Process.Kill()
		srv.Wait()
		return result{}, fmt.Errorf("client: %v (server killed)\nclient output:\n%s\nserver output:\n%s", cerr, cout.String(), sout.String())
	}
	if serr := srv.Wait(); serr != nil {
		return result{}, fmt.Errorf("server: %v\nclient output:\n%s\nserver output:\n%s", serr, cout.String(), sout.String())
	}
	if err := cmp.Or(swErr, swErr1); err != nil {
		return result{}, err
	}
	if !strings.HasPrefix(filepath.Base(name), "ib_") {
		for side, out := range map[string]string{"client": cout.String(), "server": sout.String()} {
			if err := checkLoopAllocs(out); err != nil {
				return result{}, fmt.Errorf("%s: %w", side, err)
			}
		}
	}
	r, err := parseResult(filepath.Base(name), cout.String(), latMode(mode))
	r.switches = float64(switches1 - switches0)
	return r, err
}

// contextSwitches is the guest's count of context switches since boot
// (/proc/stat's ctxt).
func contextSwitches() (uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseCtxt(string(b))
}

func parseCtxt(stat string) (uint64, error) {
	for line := range strings.Lines(stat) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "ctxt "); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, errors.New("/proc/stat has no ctxt line")
}

// checkLoopAllocs fails unless out reports a timed loop that allocated
// nothing of its own (the runtime's own allocations are not the loop's).
func checkLoopAllocs(out string) error {
	r, ok, err := loopallocs.Parse(out)
	switch {
	case err != nil:
		return fmt.Errorf("goverbs-perf's allocation report: %w", err)
	case !ok:
		return errors.New("goverbs-perf reported no heap allocations of its timed loop")
	case r.Own != 0:
		return fmt.Errorf("goverbs-perf's timed loop allocated %d times on the heap; it must not allocate:\n  %s",
			r.Own, strings.Join(r.Sites, "\n  "))
	}
	return nil
}
