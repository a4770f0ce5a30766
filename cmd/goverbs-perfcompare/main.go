// Command goverbs-perfcompare runs perftest's C tools and goverbs-perf side
// by side on one verbs device and prints a table of their message rates and
// bandwidths, then one line per row for scripts:
//
//	perf <mode> <size> <c msg/s> <go msg/s> <go/c>
//
// It is what `make perf-compare` runs inside the soft-RoCE VM:
//
//	goverbs-perfcompare -perf /path/to/goverbs-perf -d rxe0 -x 1 -a 192.0.2.1
//
// Each row runs the C server and client, then the Go server and client,
// with the same size, iterations and defaults (post list 1, CQ moderation
// 100: like for like), and reads the client's result line. The message
// rate of a latency row is 1e6 / t_typical[usec] (the median one-way
// latency: the mean swings with every TCG stall). Each row is the best of
// -reps runs of each tool, run alternately. Under TCG the absolute
// figures mean nothing; the Go/C ratio of one boot is the result.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// result is a client's result row.
type result struct {
	msgRate float64 // messages a second
	mbps    float64 // MB/sec (2^20), bandwidth modes
	row     string  // the row as printed
}

// parseResult reads the row after perftest's "#bytes" header; the Go tool
// prints the same table.
func parseResult(out string, lat bool) (result, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if !strings.Contains(sc.Text(), "#bytes") || !sc.Scan() {
			continue
		}
		f := strings.Fields(sc.Text())
		col := func(i int) (float64, error) {
			if i >= len(f) {
				return 0, fmt.Errorf("result row %q: no column %d", sc.Text(), i+1)
			}
			x, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return 0, fmt.Errorf("result row %q: column %d: %w", sc.Text(), i+1, err)
			}
			return x, nil
		}
		if lat {
			typical, err := col(4) // t_typical[usec], the median
			if err != nil || typical <= 0 {
				return result{}, errors.Join(err, fmt.Errorf("result row %q: no t_typical", sc.Text()))
			}
			return result{msgRate: 1e6 / typical, row: sc.Text()}, nil
		}
		avg, err := col(3) // BW average[MB/sec]
		if err != nil {
			return result{}, err
		}
		mpps, err := col(4) // MsgRate[Mpps]
		if err != nil {
			return result{}, err
		}
		return result{msgRate: mpps * 1e6, mbps: avg, row: sc.Text()}, nil
	}
	return result{}, errors.New("no result row (no #bytes header)")
}

type options struct {
	perf, device, gid, addr string
	sizes                   []int
	bwIters, latIters       int
	port, reps              int
	verbose                 bool
}

func main() {
	var o options
	var sizes string
	flag.StringVar(&o.perf, "perf", "goverbs-perf", "the goverbs-perf binary")
	flag.StringVar(&o.device, "d", os.Getenv("RXE_DEVICE"), "device")
	flag.StringVar(&o.gid, "x", os.Getenv("RXE_GID_INDEX"), "GID index")
	flag.StringVar(&o.addr, "a", os.Getenv("RXE_ADDR"), "this host's address on the device")
	flag.StringVar(&sizes, "sizes", "64,4096,65536", "message sizes")
	flag.IntVar(&o.bwIters, "bw-iters", 2000, "iterations of the bandwidth modes")
	flag.IntVar(&o.latIters, "lat-iters", 500, "iterations of send_lat")
	flag.IntVar(&o.port, "port", 19100, "first TCP port (one per run)")
	flag.IntVar(&o.reps, "reps", 2, "runs of each tool per row; the best counts")
	flag.BoolVar(&o.verbose, "v", false, "print every result row")
	flag.Parse()
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "goverbs-perfcompare: -sizes: %v\n", err)
			os.Exit(2)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.device == "" || o.gid == "" || o.addr == "" {
		fmt.Fprintln(os.Stderr, "goverbs-perfcompare: need -d, -x and -a (cmd/rxevm sets RXE_DEVICE, RXE_GID_INDEX, RXE_ADDR)")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "goverbs-perfcompare: %v\n", err)
		os.Exit(1)
	}
}

type row struct {
	mode string
	size int
	c, g result
}

func run(o options) error {
	var rows []row
	port := o.port
	for _, mode := range []string{"send_bw", "write_bw", "read_bw", "send_lat"} {
		for _, size := range o.sizes {
			r := row{mode: mode, size: size}
			iters := o.bwIters
			if mode == "send_lat" {
				iters = o.latIters
			}
			common := []string{"-d", o.device, "-x", o.gid, "-s", strconv.Itoa(size), "-n", strconv.Itoa(iters)}
			cArgs := append([]string{"-F"}, common...)
			goArgs := append([]string{"-t", mode}, common...)
			for range max(o.reps, 1) {
				c, err := pair(mode, "ib_"+mode, o.addr, cArgs, port)
				if err != nil {
					return fmt.Errorf("perftest %s %d: %w", mode, size, err)
				}
				port++
				g, err := pair(mode, o.perf, o.addr, goArgs, port)
				if err != nil {
					return fmt.Errorf("goverbs-perf %s %d: %w", mode, size, err)
				}
				port++
				if o.verbose {
					fmt.Printf("  C : %s\n  Go: %s\n", strings.TrimSpace(c.row), strings.TrimSpace(g.row))
				}
				if c.msgRate > r.c.msgRate {
					r.c = c
				}
				if g.msgRate > r.g.msgRate {
					r.g = g
				}
			}
			fmt.Printf("ran %-8s %6d B: C %10.0f msg/s, Go %10.0f msg/s\n", mode, size, r.c.msgRate, r.g.msgRate)
			rows = append(rows, r)
		}
	}
	fmt.Println()
	fmt.Printf("%-9s %6s %12s %12s %12s %12s %6s\n", "mode", "bytes", "C msg/s", "Go msg/s", "C MB/s", "Go MB/s", "Go/C")
	for _, r := range rows {
		mb := func(x result) string {
			if x.mbps == 0 {
				return "-"
			}
			return strconv.FormatFloat(x.mbps, 'f', 2, 64)
		}
		fmt.Printf("%-9s %6d %12.0f %12.0f %12s %12s %6.2f\n", r.mode, r.size, r.c.msgRate, r.g.msgRate, mb(r.c), mb(r.g), r.g.msgRate/r.c.msgRate)
	}
	fmt.Println()
	for _, r := range rows {
		fmt.Printf("perf %s %d %.0f %.0f %.2f\n", r.mode, r.size, r.c.msgRate, r.g.msgRate, r.g.msgRate/r.c.msgRate)
	}
	return nil
}

// pair runs name as a server and as a client of it on port and returns the
// client's result.
func pair(mode, name, addr string, args []string, port int) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args = append(args, "-p", strconv.Itoa(port))
	var sout bytes.Buffer
	srv := exec.CommandContext(ctx, name, args...)
	srv.Stdout, srv.Stderr = &sout, &sout
	if err := srv.Start(); err != nil {
		return result{}, err
	}
	if err := waitListen(ctx, port); err != nil {
		srv.Process.Kill()
		srv.Wait()
		return result{}, fmt.Errorf("%w; server output:\n%s", err, sout.String())
	}
	cout, cerr := exec.CommandContext(ctx, name, append(args, addr)...).CombinedOutput()
	serr := srv.Wait()
	if cerr != nil || serr != nil {
		return result{}, fmt.Errorf("client: %v, server: %v\nclient output:\n%s\nserver output:\n%s", cerr, serr, cout, sout.String())
	}
	return parseResult(string(cout), mode == "send_lat")
}

// waitListen waits until a TCP socket listens on port (/proc/net/tcp[6]).
func waitListen(ctx context.Context, port int) error {
	want := fmt.Sprintf(":%04X", port)
	for {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, _ := os.ReadFile(f)
			for line := range strings.Lines(string(b)) {
				fs := strings.Fields(line)
				if len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "0A" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nothing listens on TCP port %d", port)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
