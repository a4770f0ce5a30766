// Command benchratio reads `go test -bench -benchmem` output of the hand/
// benchmarks on stdin, copies it to stdout unchanged (so benchstat can read
// it), then prints the summary `make bench` promises:
//
//	cgo <ns per empty cgo call>
//	ratio <case> <go ns/op> <c ns/op> <go/c> <allocs/op>
//
// one ratio line per case, in the order the cases first appear. A case is a
// BenchmarkFast/<entry>/<n> line carrying go-ns/op and c-ns/op (the Go fast
// path and the C loop, measured alternately) and optionally cgo-ns/op (empty
// cgo calls measured alongside); the cgo line comes from BenchmarkCgoEmpty
// (cpu-ns/op where the line has it, ns/op otherwise). With -count above 1 it
// takes, for every figure, the run with the smallest go-ns/op (for a case)
// or the fastest run (for cgo): other load on the machine only ever adds
// time. allocs/op is the largest seen.
//
// With -check it also tells on stderr which cases miss the target
// (Go minus C at most 1.25 empty cgo calls plus 0.5 ns per WR or completion,
// the cgo cost being the case's own cgo-ns/op when present; and 0 allocs/op)
// and exits 1 if any does. It exits 1 when the input shows a failed test or
// holds no case at all.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// A benchmark line: name (with its -GOMAXPROCS suffix), iterations, then
// value-unit pairs (ns/op, go-ns/op, B/op, allocs/op, ...).
var (
	lineRE   = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+((?:\s+[0-9.e+-]+ \S+)+)\s*$`)
	metricRE = regexp.MustCompile(`([0-9.e+-]+) (\S+)`)
)

type result struct {
	cgo   float64
	cases []caseRatio
}

type caseRatio struct {
	name   string // entry/n
	n      int
	goNS   float64
	cNS    float64
	cgoNS  float64 // 0 when the line has none
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

// parse copies in to echo and collects the figures.
func parse(in io.Reader, echo io.Writer) (result, bool, error) {
	var res result
	byName := map[string]int{} // case name -> index in res.cases
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
		name := m[1]
		if name == "CgoEmpty" {
			ns, ok := metrics["cpu-ns/op"]
			if !ok {
				ns = metrics["ns/op"]
			}
			if res.cgo == 0 || ns < res.cgo {
				res.cgo = ns
			}
			continue
		}
		c, ok := strings.CutPrefix(name, "Fast/")
		if !ok {
			continue
		}
		goNS, okGo := metrics["go-ns/op"]
		cNS, okC := metrics["c-ns/op"]
		if !okGo || !okC {
			continue
		}
		cr := caseRatio{name: c, goNS: goNS, cNS: cNS, cgoNS: metrics["cgo-ns/op"], allocs: metrics["allocs/op"]}
		if i := strings.LastIndexByte(c, '/'); i >= 0 {
			cr.n, _ = strconv.Atoi(c[i+1:])
		}
		i, seen := byName[c]
		if !seen {
			byName[c] = len(res.cases)
			res.cases = append(res.cases, cr)
			continue
		}
		prev := &res.cases[i]
		allocs := max(prev.allocs, cr.allocs)
		if cr.goNS < prev.goNS {
			*prev = cr
		}
		prev.allocs = allocs
	}
	if err := sc.Err(); err != nil {
		return result{}, failed, err
	}
	if len(res.cases) == 0 && !failed {
		return res, failed, fmt.Errorf("no BenchmarkFast/<case> lines with go-ns/op and c-ns/op in the input")
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
		cgo := c.cgoNS
		if cgo == 0 {
			cgo = res.cgo
		}
		budget := 1.25*cgo + 0.5*float64(c.n)
		if d := c.goNS - c.cNS; d > budget {
			out = append(out, fmt.Sprintf("%s: go-c %.1f ns > %.1f ns (1.25 x %.1f cgo + 0.5 x %d)",
				c.name, d, budget, cgo, c.n))
		}
		if c.allocs != 0 {
			out = append(out, fmt.Sprintf("%s: %.0f allocs/op", c.name, c.allocs))
		}
	}
	return out
}
