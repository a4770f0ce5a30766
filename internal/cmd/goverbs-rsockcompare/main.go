// Command goverbs-rsockcompare runs goverbs-rsockstream (rstream's test on
// goverbs' rsocket package) against rstream (librdmacm's rsocket, in C), and
// both tools on the kernel's TCP, between the same addresses, and prints a
// markdown table of the spread of each cell and the ratios of the medians.
// It is what `make rsocket-compare` runs inside the soft-RoCE VM:
//
//	goverbs-rsockcompare -go /path/to/goverbs-rsockstream -a 192.0.2.1
//
// Rows: the round trip of 64 bytes (rstream's ping-pong, -S 64 -C 1 -I N:
// twice its usec/xfer), and the throughput of 64 KiB and 1 MiB transfers
// (-S SIZE -C N -I 1: N transfers one way, then N back; SIZE over
// usec/xfer). Columns (-cols): the Go rsocket at both ends (go), rstream
// at both ends blocking in its calls (c-block, -T b: the like of the Go
// rsocket's calls, which park), rstream at both ends in its default mode,
// retrying non-blocking calls (c-spin), and TCP: rstream on sockets,
// blocking (tcp-c, -T s -T b), and goverbs-rsockstream on net.TCPConn
// (tcp-go, -tcp). go-cblock and cblock-go are the mixed pairs (a Go client
// against a C server, and a C client against a Go server).
//
// A short run of each column, not counted, comes first. Each run starts
// the server, waits until it listens (rdma_cm's listeners are in `rdma
// resource show cm_id`, TCP's in /proc/net/tcp), runs the client, and
// reads the client's result line, which both tools print in rstream's
// columns. A row runs every column once, in order, -reps times,
// so a slow stretch of the host hits all columns alike. Any run that fails,
// times out or prints no result line ends the program with an error and
// both sides' output.
//
// -insns DIR counts instructions instead (make rsocket-insns, insns.go):
// the go and c-block columns at two lengths of the 64 B and 64 KiB rows,
// each client between the markers of qemu's insncount plugin; on the host,
// -insns-report DIR prints the instructions per round trip and per
// transfer by region and function.
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/cmd/goverbs-perfcompare/insns"
	"github.com/goverbs/goverbs/internal/listenwait"
)

// tool is one side's program: argv[0] and the arguments before the test's.
type tool struct {
	argv []string
	rdma bool // listens through rdma_cm, not the kernel's TCP
}

// column is one pair of tools.
type column struct {
	key, title     string
	server, client func(o options) tool
}

func goTool(o options) tool { return tool{argv: []string{o.goBin}, rdma: true} }
func cBlock(o options) tool { return tool{argv: []string{o.rstream, "-T", "b"}, rdma: true} }
func cSpin(o options) tool  { return tool{argv: []string{o.rstream}, rdma: true} }
func tcpC(o options) tool   { return tool{argv: []string{o.rstream, "-T", "s", "-T", "b"}} }
func tcpGo(o options) tool  { return tool{argv: []string{o.goBin, "-tcp"}} }

// columnKeys are the columns' names for -cols.
func columnKeys() []string {
	var ks []string
	for _, c := range columns {
		ks = append(ks, c.key)
	}
	return ks
}

var columns = []column{
	{"go", "Go rsocket", goTool, goTool},
	{"c-block", "C rsocket, blocking", cBlock, cBlock},
	{"c-spin", "C rsocket, spinning", cSpin, cSpin},
	{"tcp-c", "TCP, C", tcpC, tcpC},
	{"tcp-go", "TCP, Go", tcpGo, tcpGo},
	{"go-cblock", "Go client, C server (blocking)", cBlock, goTool},
	{"cblock-go", "C client (blocking), Go server", goTool, cBlock},
}

// row is one line of the table: a transfer size and how many.
type row struct {
	name    string
	lat     bool // a round trip in usec (-C 1 -I count); else Gb/s (-C count -I 1)
	size    int
	count   int
	results map[string][]float64 // by column key, every run in order
}

func (r row) args() []string {
	c, i := r.count, 1
	if r.lat {
		c, i = 1, r.count
	}
	return []string{"-S", strconv.Itoa(r.size), "-C", strconv.Itoa(c), "-I", strconv.Itoa(i)}
}

// value is a run's figure from its usec/xfer: the round trip (two
// transfers) in usec, or the throughput in Gb/s.
func (r row) value(usecPerXfer float64) float64 {
	if r.lat {
		return 2 * usecPerXfer
	}
	return float64(r.size) * 8 / usecPerXfer / 1e3
}

type options struct {
	goBin, rstream     string
	addr, clientBind   string
	cols               []column
	reps, port         int
	timeout            time.Duration
	insns              string // directory for -insns; "" for off
	verbose            bool
	latIters           int
	bw64kXfers, bw1MiB int
}

func main() {
	var o options
	flag.StringVar(&o.goBin, "go", "goverbs-rsockstream", "the goverbs-rsockstream binary")
	flag.StringVar(&o.rstream, "rstream", "rstream", "rdma-core's rstream")
	flag.StringVar(&o.addr, "a", os.Getenv("RXE_ADDR"), "the server's address (an RDMA device's interface)")
	flag.StringVar(&o.clientBind, "client-bind", "", "the client's address (-b); empty lets the route choose "+
		"(in rxevm's one guest rdma_cm cannot reach -a from its other address: EADDRNOTAVAIL)")
	cols := flag.String("cols", "go,c-block,tcp-c,tcp-go", "columns, in the order each rep runs them: "+strings.Join(columnKeys(), ", "))
	flag.IntVar(&o.reps, "reps", 5, "runs of each cell, the columns alternating")
	flag.IntVar(&o.latIters, "lat-iters", 5000, "round trips of a 64 B run")
	flag.IntVar(&o.bw64kXfers, "bw64k-xfers", 500, "64 KiB transfers each way of a run")
	flag.IntVar(&o.bw1MiB, "bw1m-xfers", 40, "1 MiB transfers each way of a run")
	flag.IntVar(&o.port, "port", 7600, "first port (one per run)")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "the longest a run may take")
	flag.BoolVar(&o.verbose, "v", false, "print every client's result line")
	flag.StringVar(&o.insns, "insns", "", "count instructions instead (make rsocket-insns): run the go and c-block columns at -lat-iters "+
		"round trips of 64 B and 4 times them, and at -bw64k-xfers transfers of 64 KiB each way and 4 times them, each client between "+
		"markers of qemu's insncount plugin, and write the runs, the tools' maps and kallsyms to `DIR`")
	report := flag.String("insns-report", "", "on the host, after a -insns run: print the instructions per round trip and per 64 KiB "+
		"transfer of Go and C from `DIR` (with the plugin's snaps.txt in it)")
	top := flag.Int("insns-top", 25, "with -insns-report: how many functions to list per row")
	filter := flag.String("insns-filter", "", "with -insns-report: list only functions whose region and name contain `TEXT`")
	flag.Parse()
	if *report != "" {
		if err := printInsns(os.Stdout, *report, *top, *filter); err != nil {
			fmt.Fprintf(os.Stderr, "goverbs-rsockcompare: %v\n", err)
			os.Exit(1)
		}
		return
	}
	for _, k := range strings.Split(*cols, ",") {
		i := slices.IndexFunc(columns, func(c column) bool { return c.key == k })
		if i < 0 {
			fmt.Fprintf(os.Stderr, "goverbs-rsockcompare: -cols: no column %q (have %s)\n", k, strings.Join(columnKeys(), ", "))
			os.Exit(2)
		}
		o.cols = append(o.cols, columns[i])
	}
	if o.addr == "" || o.reps < 1 || o.latIters < 1 || o.bw64kXfers < 1 || o.bw1MiB < 1 {
		fmt.Fprintln(os.Stderr, "goverbs-rsockcompare: need -a (rxevm sets RXE_ADDR), and -reps and the counts at least 1")
		os.Exit(2)
	}
	if o.insns != "" {
		if err := runInsns(o); err != nil {
			fmt.Fprintf(os.Stderr, "goverbs-rsockcompare: %v\n", err)
			os.Exit(1)
		}
		return
	}
	rows := []row{
		{name: "64 B round trip, us", lat: true, size: 64, count: o.latIters},
		{name: "64 KiB throughput, Gb/s", size: 64 << 10, count: o.bw64kXfers},
		{name: "1 MiB throughput, Gb/s", size: 1 << 20, count: o.bw1MiB},
	}
	if err := run(o, rows, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "goverbs-rsockcompare: %v\n", err)
		os.Exit(1)
	}
	fmt.Println()
	printTable(os.Stdout, o, rows)
}

// run fills rows' results, printing a line a run.
func run(o options, rows []row, w io.Writer) error {
	port, err := warmUp(o)
	if err != nil {
		return err
	}
	for i := range rows {
		r := &rows[i]
		r.results = map[string][]float64{}
		for rep := range o.reps {
			for _, c := range o.cols {
				port++
				usec, line, err := pair(o, c, r.args(), r.size, port, "")
				if err != nil {
					return fmt.Errorf("%s, %s (%s), run %d: %w", r.name, c.key, c.title, rep+1, err)
				}
				v := r.value(usec)
				r.results[c.key] = append(r.results[c.key], v)
				if o.verbose {
					fmt.Fprintf(w, "  %-9s %s\n", c.key, line)
				}
			}
		}
		fmt.Fprintf(w, "ran %s: %d runs of each column\n", r.name, o.reps)
	}
	return nil
}

// warmUp runs each column once, shortly, not counted: it proves every
// pair works before the long runs, and brings the tools and their
// libraries into the guest's page cache, so that no counted run waits for
// the host's disk. It returns the last port it used.
func warmUp(o options) (port int, err error) {
	port = o.port
	for _, c := range o.cols {
		port++
		if _, _, err := pair(o, c, []string{"-S", "64", "-C", "1", "-I", "10"}, 64, port, ""); err != nil {
			return 0, fmt.Errorf("warm-up, %s (%s): %w", c.key, c.title, err)
		}
	}
	return port, nil
}

// pair runs one server and client of column c with args and returns the
// client's usec/xfer and its result line. With maps (for -insns), it
// writes there the executable mappings of both processes as they last were
// while they ran (insns.WatchMaps), and calls insns.Marker once the client
// has started and again once both have ended: the wait for the server to
// listen (an rdma command every 25 ms, or /proc/net/tcp), whose kernel
// work would weigh as thousands of messages', is outside, and the client's
// start, where its runtime works and rstream's does not, inside.
func pair(o options, c column, args []string, size, port int, maps string) (float64, string, error) {
	ctx, cancel := watchdog(o.timeout)
	defer cancel()
	st, ct := c.server(o), c.client(o)
	p := []string{"-p", strconv.Itoa(port)}
	var sout, cout strings.Builder
	srv := exec.CommandContext(ctx, st.argv[0], slices.Concat(st.argv[1:], args, p, []string{"-b", o.addr})...)
	srv.Stdout, srv.Stderr = &sout, &sout
	if err := srv.Start(); err != nil {
		return 0, "", err
	}
	stop := func() { srv.Process.Kill(); srv.Wait() }
	var err error
	if st.rdma {
		err = listenwait.CM(ctx, port)
	} else {
		err = listenwait.TCP(ctx, port)
	}
	if err != nil {
		stop()
		return 0, "", fmt.Errorf("%s: %w; server output:\n%s", st.argv[0], err, sout.String())
	}
	cargs := slices.Concat(ct.argv[1:], args, p, []string{"-s", o.addr})
	if o.clientBind != "" {
		cargs = append(cargs, "-b", o.clientBind)
	}
	cli := exec.CommandContext(ctx, ct.argv[0], cargs...)
	cli.Stdout, cli.Stderr = &cout, &cout
	err = cli.Start()
	if err == nil {
		if maps != "" {
			insns.Marker()
			stopMaps := insns.WatchMaps(maps, srv.Process.Pid, cli.Process.Pid)
			err = cli.Wait()
			stopMaps()
			defer insns.Marker() // after the server's Wait
		} else {
			err = cli.Wait()
		}
	}
	if err != nil {
		stop() // it would wait for the client until ctx ends
		return 0, "", fmt.Errorf("client %v: %v\nclient output:\n%s\nserver output:\n%s", cli.Args, err, cout.String(), sout.String())
	}
	if err := srv.Wait(); err != nil {
		return 0, "", fmt.Errorf("server %v: %v\nclient output:\n%s\nserver output:\n%s", srv.Args, err, cout.String(), sout.String())
	}
	usec, line, err := parseResult(cout.String(), size)
	if err != nil {
		return 0, "", fmt.Errorf("client %v: %w; its output:\n%s", cli.Args, err, cout.String())
	}
	return usec, line, nil
}

// watchdog is a context that ends after d, counted in ticks of 100 ms.
// Under qemu's -icount sleep=off the guest's clock leaps, whenever the
// guest waits with nothing to run (for the host's disk, as a process
// starts), to the next timer's deadline: a lone deadline minutes away
// would end a run that took a second. A tick always pending bounds each
// leap to 100 ms.
func watchdog(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for range d / (100 * time.Millisecond) {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		cancel()
	}()
	return ctx, cancel
}

// parseResult reads the result line both tools print under rstream's
// header (name bytes xfers iters total time Gb/sec usec/xfer): a line
// starting "custom" whose bytes are size, as a number or as rstream's
// size_str writes it ("64k", "1m"). It returns the usec/xfer, which must
// be a positive number.
func parseResult(out string, size int) (float64, string, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "custom" {
			continue
		}
		if len(f) != 8 {
			return 0, "", fmt.Errorf("result line %q: %d columns, want 8", sc.Text(), len(f))
		}
		if f[1] != strconv.Itoa(size) && f[1] != sizeStr(size) {
			return 0, "", fmt.Errorf("result line %q: bytes %s, want %d", sc.Text(), f[1], size)
		}
		x, err := strconv.ParseFloat(f[7], 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 {
			return 0, "", fmt.Errorf("result line %q: usec/xfer %s is not a positive number", sc.Text(), f[7])
		}
		return x, strings.TrimSpace(sc.Text()), nil
	}
	return 0, "", errors.New("no result line (custom ...)")
}

// sizeStr is a size as rstream prints it: in k, m or g when at least one
// of them, with one decimal below 10 of them where it is not 0.
func sizeStr(n int) string {
	base, mag := 1, ""
	switch {
	case n >= 1<<30:
		base, mag = 1<<30, "g"
	case n >= 1<<20:
		base, mag = 1<<20, "m"
	case n >= 1<<10:
		base, mag = 1<<10, "k"
	}
	if frac := (n % base) * 10 / base; n/base < 10 && frac != 0 {
		return fmt.Sprintf("%d.%d%s", n/base, frac, mag)
	}
	return fmt.Sprintf("%d%s", n/base, mag)
}

// spread is the minimum, median and maximum of xs (the mean of the middle
// two for an even count).
type spread struct{ min, med, max float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{math.NaN(), math.NaN(), math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	return spread{min: s[0], med: (s[(n-1)/2] + s[n/2]) / 2, max: s[n-1]}
}

// num prints x with three significant digits, at least none after the
// point, "-" where it is not a number.
func num(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "-"
	case math.Abs(x) >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case math.Abs(x) >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

// printTable prints the spreads, then Go's median over each other
// column's, with the direction that is better said in the row.
func printTable(w io.Writer, o options, rows []row) {
	fmt.Fprintf(w, "| min / median / max of %d runs |", o.reps)
	for _, c := range o.cols {
		fmt.Fprintf(w, " %s |", c.title)
	}
	fmt.Fprintf(w, "\n| --- |%s\n", strings.Repeat(" ---: |", len(o.cols)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |", r.name)
		for _, c := range o.cols {
			s := spreadOf(r.results[c.key])
			fmt.Fprintf(w, " %s / **%s** / %s |", num(s.min), num(s.med), num(s.max))
		}
		fmt.Fprintln(w)
	}
	if !slices.ContainsFunc(o.cols, func(c column) bool { return c.key == "go" }) {
		return
	}
	var others []column
	for _, c := range o.cols {
		if c.key != "go" {
			others = append(others, c)
		}
	}
	fmt.Fprintf(w, "\n| Go rsocket's median over |")
	for _, c := range others {
		fmt.Fprintf(w, " %s |", c.title)
	}
	fmt.Fprintf(w, "\n| --- |%s\n", strings.Repeat(" ---: |", len(others)))
	for _, r := range rows {
		better := "above 1: Go is faster"
		if r.lat {
			better = "below 1: Go is faster"
		}
		fmt.Fprintf(w, "| %s (%s) |", cmp.Or(strings.Split(r.name, ",")[0], r.name), better)
		g := spreadOf(r.results["go"]).med
		for _, c := range others {
			fmt.Fprintf(w, " %s |", ratio(g/spreadOf(r.results[c.key]).med))
		}
		fmt.Fprintln(w)
	}
}

func ratio(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}
