// Command benchratio reads `go test -bench -benchmem` output of the hand/
// benchmarks on stdin, copies it to stdout unchanged (so benchstat can read
// it), then prints the summary `make bench` promises:
//
//	cgo <ns per empty cgo call>
//	ratio <case> <go ns/op> <c ns/op> <go/c> <allocs/op>
//
// one ratio line per case, in the order the cases first appear. It pairs
// BenchmarkFast/<entry>/<n>/go with BenchmarkFast/<entry>/<n>/c and reads the
// empty call from BenchmarkCgoEmpty. It reads cpu-ns/op (the process CPU
// time per op, which time the scheduler gives to other processes does not
// inflate) where a line has it, ns/op otherwise. With -count above 1 it takes, for each
// benchmark, the fastest run: other load on the machine only ever adds time,
// so the minimum is the figure it disturbed least. allocs/op is the largest
// seen.
//
// With -check it also tells on stderr which cases miss the target
// (Go minus C at most 1.25 empty cgo calls plus 0.5 ns per WR or completion,
// and 0 allocs/op) and exits 1 if any does. It exits 1 when the input shows a
// failed test or holds no pair at all.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A benchmark line: name (with its -GOMAXPROCS suffix), iterations, then
// value-unit pairs (ns/op, cpu-ns/op, B/op, allocs/op, ...).
var (
	lineRE   = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+((?:\s+[0-9.e+-]+ \S+)+)\s*$`)
	metricRE = regexp.MustCompile(`([0-9.e+-]+) (\S+)`)
)

type sample struct {
	ns     []float64
	allocs []float64
}

type result struct {
	cgo   float64
	cases []caseRatio
}

type caseRatio struct {
	name   string // entry/n
	n      int
	goNS   float64
	cNS    float64
	allocs float64
}

func main() {
	check := flag.Bool("check", false, "report cases that miss the targets on stderr and exit 1 if any does")
	flag.Parse()
	res, failed, err := parse(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
	write(os.Stdout, res)
	code := 0
	if failed {
		fmt.Fprintln(os.Stderr, "benchratio: the benchmark run failed")
		code = 1
	}
	if *check {
		for _, m := range misses(res) {
			fmt.Fprintln(os.Stderr, "benchratio: target missed:", m)
			code = 1
		}
	}
	os.Exit(code)
}

// parse copies in to echo and collects the samples.
func parse(in io.Reader, echo io.Writer) (result, bool, error) {
	samples := map[string]*sample{}
	var order []string
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(echo, line)
		if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL") || strings.HasPrefix(line, "panic:") {
			failed = true
		}
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		metrics := map[string]float64{}
		for _, mm := range metricRE.FindAllStringSubmatch(m[2], -1) {
			v, err := strconv.ParseFloat(mm[1], 64)
			if err != nil {
				return result{}, failed, fmt.Errorf("%q: %v", line, err)
			}
			metrics[mm[2]] = v
		}
		ns, ok := metrics["cpu-ns/op"]
		if !ok {
			ns, ok = metrics["ns/op"]
		}
		if !ok {
			continue
		}
		s := samples[m[1]]
		if s == nil {
			s = &sample{}
			samples[m[1]] = s
			order = append(order, m[1])
		}
		s.ns = append(s.ns, ns)
		if a, ok := metrics["allocs/op"]; ok {
			s.allocs = append(s.allocs, a)
		}
	}
	if err := sc.Err(); err != nil {
		return result{}, failed, err
	}
	var res result
	if s := samples["CgoEmpty"]; s != nil {
		res.cgo = minOf(s.ns)
	}
	for _, name := range order {
		rest, ok := strings.CutPrefix(name, "Fast/")
		if !ok {
			continue
		}
		c, ok := strings.CutSuffix(rest, "/go")
		if !ok {
			continue
		}
		cs := samples["Fast/"+c+"/c"]
		if cs == nil {
			continue
		}
		gs := samples[name]
		n := 0
		if i := strings.LastIndexByte(c, '/'); i >= 0 {
			n, _ = strconv.Atoi(c[i+1:])
		}
		res.cases = append(res.cases, caseRatio{name: c, n: n, goNS: minOf(gs.ns), cNS: minOf(cs.ns),
			allocs: maxOf(gs.allocs)})
	}
	if len(res.cases) == 0 && !failed {
		return res, failed, fmt.Errorf("no Fast/<case>/go and /c benchmark pairs in the input")
	}
	return res, failed, nil
}

func write(w io.Writer, res result) {
	fmt.Fprintf(w, "cgo %.1f\n", res.cgo)
	for _, c := range res.cases {
		ratio := 0.0
		if c.cNS > 0 {
			ratio = c.goNS / c.cNS
		}
		fmt.Fprintf(w, "ratio %s %.0f %.0f %.2f %.0f\n", c.name, c.goNS, c.cNS, ratio, c.allocs)
	}
}

// misses lists the cases over the target of issue 3.
func misses(res result) []string {
	var out []string
	for _, c := range res.cases {
		budget := 1.25*res.cgo + 0.5*float64(c.n)
		if d := c.goNS - c.cNS; d > budget {
			out = append(out, fmt.Sprintf("%s: go-c %.1f ns > %.1f ns (1.25 cgo + 0.5 x %d)", c.name, d, budget, c.n))
		}
		if c.allocs != 0 {
			out = append(out, fmt.Sprintf("%s: %.0f allocs/op", c.name, c.allocs))
		}
	}
	return out
}

func minOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Min(v)
}

func maxOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v)
}
