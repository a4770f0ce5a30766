package cmtime

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/listenwait"
)

// -compare runs, in a guest with rxe0 and cmtime, each variant -runs
// times, alternately: C cmtime against itself, the hand client against the
// hand server, both with -shared, the raw client (raw+qp: destroying each
// QP, as Conn.Close does and cmtime does not) and the step client (with
// -shared: cmtime's QPs share their CQs too) against C's server, and C's
// client against the raw server (rawsrv: the control for hand's server's
// CPU, cmtime's server's calls made from Go), once more with each QP
// destroyed at the disconnect (rawsrv+qp).
// Each run's server is started again; its CPU per connection is its CPU
// time from when it listens to its exit, over N: the rusage at exit less
// what /proc/PID/stat says once it listens. Its start (librdmacm reading
// the devices: tens to hundreds of ms, varying run to run) is left out;
// taken off as the CPU of another server killed once it listened, it
// left the per-connection figure mostly noise.
// It prints per step the median us/conn of each variant and its ratio to
// C's, then the servers' CPU per connection.

type compareConfig struct {
	on     bool
	runs   int
	conns  int
	cmtime string
	addr   string
}

type variant struct {
	name           string
	server, client []string // argv after the program: C's cmtime when cServer, cClient
	cServer        bool
	cClient        bool
}

// result is one run: the client's us/conn by step, the server's CPU per
// connection.
type result struct {
	step map[string]float64
	cpu  float64
}

func compare(ctx context.Context, cfg compareConfig, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	n := strconv.Itoa(cfg.conns)
	variants := []variant{
		{name: "C", server: []string{"-c", n}, client: []string{"-s", cfg.addr, "-c", n}, cServer: true, cClient: true},
		{name: "hand", server: []string{"-c", n}, client: []string{"-s", cfg.addr, "-c", n}},
		{name: "shared", server: []string{"-shared", "-c", n}, client: []string{"-shared", "-s", cfg.addr, "-c", n}},
		{name: "raw", server: []string{"-c", n}, client: []string{"-layer", "raw", "-s", cfg.addr, "-c", n}, cServer: true},
		{name: "raw+qp", server: []string{"-c", n}, client: []string{"-layer", "raw", "-destroy-qp", "-s", cfg.addr, "-c", n}, cServer: true},
		{name: "step", server: []string{"-c", n}, client: []string{"-layer", "step", "-shared", "-s", cfg.addr, "-c", n}, cServer: true},
		{name: "rawsrv", server: []string{"-layer", "raw", "-c", n}, client: []string{"-s", cfg.addr, "-c", n}, cClient: true},
		{name: "rawsrv+qp", server: []string{"-layer", "raw", "-destroy-qp", "-c", n}, client: []string{"-s", cfg.addr, "-c", n}, cClient: true},
	}
	prog := func(c bool) string {
		if c {
			return cfg.cmtime
		}
		return self
	}
	results := make([][]result, len(variants))
	for r := range cfg.runs {
		for vi, v := range variants {
			res, out, err := runPair(ctx, prog(v.cServer), v.server, prog(v.cClient), v.client)
			if err != nil {
				return fmt.Errorf("run %d, %s: %w\n%s", r+1, v.name, err, out)
			}
			res.cpu /= float64(cfg.conns)
			results[vi] = append(results[vi], res)
			fmt.Fprintf(stderr, "run %d %-6s %s: server cpu %.1f us/conn\n", r+1, v.name, oneLine(res.step), res.cpu)
		}
	}
	median := func(vi int, get func(result) (float64, bool)) (float64, bool) {
		var xs []float64
		for _, r := range results[vi] {
			if x, ok := get(r); ok {
				xs = append(xs, x)
			}
		}
		if len(xs) == 0 {
			return 0, false
		}
		slices.Sort(xs)
		if len(xs)%2 == 1 {
			return xs[len(xs)/2], true
		}
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2, true
	}
	fmt.Fprintf(stdout, "cmtime: %d connections, %d runs each, median us/conn of each step (the step's wall time / connections)\n", cfg.conns, cfg.runs)
	fmt.Fprintf(stdout, "%-14s", "step")
	for _, v := range variants {
		fmt.Fprintf(stdout, " %10s", v.name)
		if v.name != "C" {
			fmt.Fprintf(stdout, " %8s", v.name+"/C")
		}
	}
	fmt.Fprintln(stdout)
	for _, step := range []string{"create id", "resolve addr", "resolve route", "create qp", "resolve+qp", "connect", "disconnect", "destroy"} {
		fmt.Fprintf(stdout, "%-14s", step)
		c, cok := median(0, stepOf(step))
		for vi, v := range variants {
			x, ok := median(vi, stepOf(step))
			if !ok {
				fmt.Fprintf(stdout, " %10s", "-")
			} else {
				fmt.Fprintf(stdout, " %10.1f", x)
			}
			if v.name == "C" {
				continue
			}
			if ok && cok && c > 0 {
				fmt.Fprintf(stdout, " %8.2f", x/c)
			} else {
				fmt.Fprintf(stdout, " %8s", "-")
			}
		}
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "%-14s", "server cpu")
	cpu := func(r result) (float64, bool) { return r.cpu, true }
	c, _ := median(0, cpu)
	for vi, v := range variants {
		x, _ := median(vi, cpu)
		fmt.Fprintf(stdout, " %10.1f", x)
		if v.name != "C" {
			fmt.Fprintf(stdout, " %8.2f", x/max(c, 1e-9))
		}
	}
	fmt.Fprintln(stdout, "   (us/conn; raw's and step's server is C's, rawsrv's the raw layer's, rawsrv+qp's also destroys each QP)")
	return nil
}

// stepOf reads a step from a run; "resolve+qp" is create id to create qp,
// summed where the client timed them apart.
func stepOf(step string) func(result) (float64, bool) {
	return func(r result) (float64, bool) {
		if x, ok := r.step[step]; ok {
			return x, true
		}
		if step != "resolve+qp" {
			return 0, false
		}
		sum := 0.0
		for _, s := range []string{"create id", "resolve addr", "resolve route", "create qp"} {
			x, ok := r.step[s]
			if !ok {
				return 0, false
			}
			sum += x
		}
		return sum, true
	}
}

func oneLine(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%.1f ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

// runPair starts the server, waits until it listens, runs the client to
// the end and waits for the server, returning the client's table and the
// server's CPU time (us).
func runPair(ctx context.Context, server string, sargs []string, client string, cargs []string) (result, string, error) {
	var sout strings.Builder
	srv := exec.CommandContext(ctx, server, sargs...)
	srv.Stdout, srv.Stderr = &sout, &sout
	if err := srv.Start(); err != nil {
		return result{}, "", err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := listenwait.CM(wctx, 7471)
	cancel()
	if err != nil {
		srv.Process.Kill()
		srv.Wait()
		return result{}, sout.String(), err
	}
	start, err := statCPU(srv.Process.Pid)
	if err != nil {
		srv.Process.Kill()
		srv.Wait()
		return result{}, sout.String(), err
	}
	out, cerr := exec.CommandContext(ctx, client, cargs...).CombinedOutput()
	// cmtime's server does not always exit once its connections are gone
	// (it can wait on for an event that does not come): blocked, it spends
	// no CPU, so a server still there after a grace is killed, and its
	// CPU time read all the same.
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	var serr error
	select {
	case serr = <-exited:
	case <-time.After(3 * time.Second):
		srv.Process.Kill()
		<-exited
	}
	if cerr != nil || serr != nil {
		return result{}, "client:\n" + string(out) + "server:\n" + sout.String(), fmt.Errorf("client: %v, server: %v", cerr, serr)
	}
	steps, err := parseTable(string(out))
	if err != nil {
		return result{}, string(out), err
	}
	return result{step: steps, cpu: max(cpuOf(srv.ProcessState)-start, 0)}, "", nil
}

// statCPU returns the CPU time (us) process pid has used so far, user
// and system, from /proc/PID/stat (in clock ticks of 10 ms: USER_HZ is
// 100 on Linux).
func statCPU(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: state is field 3, utime and stime fields 14 and 15.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	var ticks float64
	for _, s := range f[11:13] {
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %q: %w", pid, b, err)
		}
		ticks += n
	}
	return ticks * 10000, nil
}

func cpuOf(ps *os.ProcessState) float64 {
	return float64(ps.UserTime()+ps.SystemTime()) / float64(time.Microsecond)
}

// parseTable reads cmtime's table: "step name    :  total max min us/conn".
func parseTable(out string) (map[string]float64, error) {
	steps := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		f := strings.Fields(rest)
		if !ok || len(f) != 4 {
			continue
		}
		us, err := strconv.ParseFloat(f[3], 64)
		if err != nil {
			continue
		}
		steps[strings.TrimSpace(name)] = us
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("no cmtime table in the client's output")
	}
	return steps, nil
}
