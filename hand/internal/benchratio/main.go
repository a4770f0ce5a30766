// Command benchratio reads `go test -bench -benchmem` output of the hand/
// benchmarks on stdin, copies it to stdout unchanged (so benchstat can read
// it), then prints the summary `make bench` promises:
//
//	cgo <ns per empty cgo call>
//	ratio <case> <go ns/op> <c ns/op> <go/c> <allocs/op>
//
// one ratio line per case, in the order the cases first appear. A case is a
// <Benchmark>/<entry>/<n> line of one of the compared benchmarks (families:
// BenchmarkFast, hand's fast paths, and BenchmarkGenerated, the generated
// packages' data-path stubs), named without its "Benchmark" prefix
// (Fast/post_recv/32), carrying go-ns/op and c-ns/op (the Go side and the C
// loop, measured alternately) and optionally cgo-ns/op (empty cgo calls
// measured alongside); the cgo line comes from BenchmarkCgoEmpty (cpu-ns/op
// where the line has it, ns/op otherwise). With -count above 1 it takes, for
// every figure, the run with the smallest go-ns/op (for a case) or the
// fastest run (for cgo): other load on the machine only ever adds time.
// allocs/op is the largest seen.
//
// Each family has its own bounds on go-c, in empty cgo calls (the case's own
// cgo-ns/op when present, else the cgo line) plus ns per WR or completion,
// and 0 allocs/op. With -check it tells on stderr which cases miss their
// family's target and exits 1 if any does: BenchmarkFast's is 1.25 cgo calls
// plus 0.5 ns per WR, BenchmarkGenerated's 1 cgo call plus 1 ns per WR. With
// -gate it does the same against the bounds of `make test`'s regression gate
// (make bench-gate): BenchmarkFast's is 2 cgo calls plus 1 ns per WR,
// BenchmarkGenerated's 1.5 cgo calls (each an empty call of the stub's own
// shape) plus 1 ns per WR, both looser than their targets so as not to fail
// on a loaded machine: a generated stub is one crossing around the C
// function it calls, with nothing to check. The check
// is judged on the ratio lines' runs; the gate catches regressions (an
// allocation, an extra crossing) without failing on a noisy machine, so it
// judges each case by its run with the smallest go-c, each run's Go and C
// sides being measured together: a regression adds to Go in every run, where
// the run with the fastest Go side can be one whose C side came out unusually
// fast too. Every message names the case, go-c, the bound it broke, how that
// bound was computed and how many runs the case had.
//
// With -gate -retry FILE, a run whose only failures are cases over their
// time bound writes a go test -bench pattern selecting just those cases to
// FILE and exits 2, so that the caller can run them again before failing; an
// allocation, a failed run or a case without allocs/op (no -benchmem) still
// exits 1. -brief leaves the benchmark lines out of the copy to stdout.
//
// It exits 1 when the input shows a failed test or holds no case at all.
package main

import (
	"bufio"
	"bytes"
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
	cgo float64
	// Per case, in the order they first appear: the run with the fastest
	// Go side (the ratio lines', -check's), and the run with the smallest
	// go-c (the gate's), each with allocs/op the largest of all the case's
	// runs and runs their number.
	cases, leastGap []caseRatio
}

type caseRatio struct {
	name      string // <family>/<entry>/<n>: Fast/post_recv/32
	fam       *family
	n         int
	goNS      float64
	cNS       float64
	cgoNS     float64 // 0 when the line has none
	allocs    float64
	hasAllocs bool // the line carries allocs/op (go test -benchmem)
	runs      int  // runs of the case seen
}

func (c caseRatio) gap() float64 { return c.goNS - c.cNS }

// A bound on go-c: cgoCalls empty cgo calls plus perWR ns per WR or
// completion, and no allocation.
type bound struct {
	name     string // as messages name it: "fast-path gate"
	cgoCalls float64
	perWR    float64
	benchmem bool // a case without allocs/op misses (it cannot be judged)
	leastGap bool // judge each case by its run with the smallest go-c, not its fastest Go side
}

// A family is one compared benchmark, whose sub-benchmarks are its cases,
// and its two bounds.
type family struct {
	bench string // the benchmark's name without "Benchmark"
	check bound  // -check's target, make bench BENCH_CHECK=1
	gate  bound  // -gate's, make test's regression gate
}

// What a run is judged against: -check or -gate.
type judge int

const (
	byCheck judge = iota
	byGate
)

func (f *family) bound(j judge) bound {
	if j == byGate {
		return f.gate
	}
	return f.check
}

var (
	// fast is hand's fast paths. Its target: Go at most 1.25 empty cgo
	// calls plus half a nanosecond a WR over C. Its gate is looser, loose
	// enough for a loaded 2-core machine, tight enough that an allocation
	// or an extra crossing per WR shows.
	fast = family{bench: "Fast",
		check: bound{name: "fast-path target", cgoCalls: 1.25, perWR: 0.5},
		gate:  bound{name: "fast-path gate", cgoCalls: 2, perWR: 1, benchmem: true, leastGap: true},
	}
	// generated is the generated packages' data-path stubs, each one
	// crossing around the C function it calls: one cgo call plus 1 ns a WR
	// over C, for the target and the gate alike. The case's cgo-ns/op is
	// an empty call of the stub's own shape (its arguments, its result,
	// errno where it reads it: BenchmarkGenerated's cases), 0-7 ns above a
	// call with no arguments; what the stub adds over that crossing must
	// fit in 1 ns a WR: the target. The gate allows half a crossing more,
	// as the fast paths' does a whole one: on a 2-core machine a case's
	// go-c moved by up to 12 ns between processes, and poll_cq/1 sits 0.3-1
	// ns over the target (PollCQ is a Go call of its own: a stub with an
	// error path cannot be inlined). Half a crossing still fails a stub
	// that makes cgo check two pointer arguments (10-17 ns each), an extra
	// crossing or an allocation.
	generated = family{bench: "Generated",
		check: bound{name: "generated-stub target", cgoCalls: 1, perWR: 1},
		gate:  bound{name: "generated-stub gate", cgoCalls: 1.5, perWR: 1, benchmem: true, leastGap: true},
	}
	// families are the compared benchmarks, in the order messages list them.
	families = []*family{&fast, &generated}
)

// String is the bound as a formula: "2 x cgo + 1 ns/WR, 0 allocs/op".
func (b bound) String() string {
	return fmt.Sprintf("%g x cgo + %g ns/WR, 0 allocs/op", b.cgoCalls, b.perWR)
}

// bounds lists each family's bound of j: "BenchmarkFast 2 x cgo + ...; BenchmarkGenerated 1 x cgo + ...".
func bounds(j judge) string {
	var out []string
	for _, f := range families {
		out = append(out, "Benchmark"+f.bench+" "+f.bound(j).String())
	}
	return strings.Join(out, "; ")
}

// Exit codes: exitMissed is also a failed run or unusable input;
// exitRetry is -gate -retry's "only time misses, run them again", which
// make bench-gate acts on, so a usage error has a code of its own.
const (
	exitMissed = 1
	exitRetry  = 2
	exitUsage  = 3
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchratio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "report cases over their target ("+bounds(byCheck)+") on stderr and exit 1 if any is")
	gate := fs.Bool("gate", false, "report cases over their gate's bound ("+bounds(byGate)+") on stderr and exit 1 if any is")
	retry := fs.String("retry", "", "with -gate: when only time bounds are missed, write a -bench pattern of those cases to this file and exit 2")
	brief := fs.Bool("brief", false, "leave the benchmark lines out of the copy to stdout")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *retry != "" && !*gate {
		fmt.Fprintln(stderr, "benchratio: -retry needs -gate")
		return exitUsage
	}
	echo := stdout
	if *brief {
		echo = nonBench{stdout}
	}
	res, failed, err := parse(stdin, echo)
	if err != nil {
		fmt.Fprintln(stderr, "benchratio:", err)
		return exitMissed
	}
	write(stdout, res)
	code := 0
	if failed {
		fmt.Fprintln(stderr, "benchratio: the benchmark run failed")
		code = exitMissed
	}
	if *check {
		for _, m := range misses(res, byCheck) {
			fmt.Fprintln(stderr, "benchratio: target missed:", m)
			code = exitMissed
		}
	}
	if *gate {
		ms := misses(res, byGate)
		hard := failed
		var slow []caseRatio
		for _, m := range ms {
			if m.allocs || m.noAllocs {
				hard = true
			} else {
				slow = append(slow, m.c)
			}
		}
		// A miss that will be run again is not yet a failure: the log
		// says so, so that a gate which passes on the retry never shows
		// "gate failed" first.
		retrying := !hard && *retry != ""
		verdict := "gate failed:"
		if retrying {
			verdict = "over the gate's time bound, to run again:"
		}
		for _, m := range ms {
			fmt.Fprintln(stderr, "benchratio:", verdict, m)
		}
		switch {
		case len(ms) == 0:
			if !failed {
				fmt.Fprintf(stderr, "benchratio: gate passed: %s\n", passed(res))
			}
		case !retrying:
			code = exitMissed
		default:
			if err := os.WriteFile(*retry, []byte(benchPattern(slow)+"\n"), 0o644); err != nil {
				fmt.Fprintln(stderr, "benchratio:", err)
				return exitMissed
			}
			if code == 0 {
				code = exitRetry
			}
		}
	}
	return code
}

// nonBench copies every line but benchmark result lines.
type nonBench struct{ w io.Writer }

func (e nonBench) Write(p []byte) (int, error) {
	if lineRE.Match(bytes.TrimRight(p, "\n")) {
		return len(p), nil
	}
	return e.w.Write(p)
}

// passed says, per family with cases, how many passed which bound:
// "67 BenchmarkFast cases within go-c <= 2 x cgo + 1 ns/WR, 0 allocs/op; ...".
func passed(res result) string {
	var out []string
	for _, f := range families {
		n := 0
		for _, c := range res.cases {
			if c.fam == f {
				n++
			}
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%d Benchmark%s cases within go-c <= %s", n, f.bench, f.gate))
		}
	}
	return strings.Join(out, "; ")
}

// benchPattern is a go test -bench pattern that selects just cases (each
// level anchored; cases joined by a top-level |, which go test treats as
// alternatives).
func benchPattern(cases []caseRatio) string {
	var alts []string
	for _, c := range cases {
		var elems []string
		for i, e := range strings.Split(c.name, "/") {
			if i == 0 {
				e = "Benchmark" + e
			}
			elems = append(elems, "^"+regexp.QuoteMeta(e)+"$")
		}
		alts = append(alts, strings.Join(elems, "/"))
	}
	return strings.Join(alts, "|")
}

// familyOf is the family whose case name is the benchmark line's name
// (without "Benchmark" and its -GOMAXPROCS suffix), or nil.
func familyOf(name string) *family {
	for _, f := range families {
		if strings.HasPrefix(name, f.bench+"/") {
			return f
		}
	}
	return nil
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
		fam := familyOf(name)
		if fam == nil {
			continue
		}
		goNS, okGo := metrics["go-ns/op"]
		cNS, okC := metrics["c-ns/op"]
		if !okGo || !okC {
			continue
		}
		allocs, hasAllocs := metrics["allocs/op"]
		cr := caseRatio{name: name, fam: fam, goNS: goNS, cNS: cNS, cgoNS: metrics["cgo-ns/op"], allocs: allocs, hasAllocs: hasAllocs, runs: 1}
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			cr.n, _ = strconv.Atoi(name[i+1:])
		}
		i, seen := byName[name]
		if !seen {
			byName[name] = len(res.cases)
			res.cases = append(res.cases, cr)
			res.leastGap = append(res.leastGap, cr)
			continue
		}
		fastest, least := &res.cases[i], &res.leastGap[i]
		worst, all, runs := max(fastest.allocs, cr.allocs), fastest.hasAllocs && cr.hasAllocs, fastest.runs+1
		if cr.goNS < fastest.goNS {
			*fastest = cr
		}
		if cr.gap() < least.gap() {
			*least = cr
		}
		for _, kept := range []*caseRatio{fastest, least} {
			kept.allocs, kept.hasAllocs, kept.runs = worst, all, runs
		}
	}
	if err := sc.Err(); err != nil {
		return result{}, failed, err
	}
	if len(res.cases) == 0 && !failed {
		return res, failed, fmt.Errorf("no Benchmark{%s}/<case> lines with go-ns/op and c-ns/op in the input", familyNames())
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

// A miss is one case over one bound, with its message.
type miss struct {
	c        caseRatio
	allocs   bool // it allocates (else it is over the time bound)
	noAllocs bool // the line has no allocs/op to judge
	msg      string
}

func (m miss) String() string { return m.msg }

// familyNames is "Fast,Generated".
func familyNames() string {
	var names []string
	for _, f := range families {
		names = append(names, f.bench)
	}
	return strings.Join(names, ",")
}

// misses lists the cases over their family's bound of j, each message
// naming the case, go-c, the bound (by name and formula) and how it was
// computed.
func misses(res result, j judge) []miss {
	var out []miss
	for i := range res.cases {
		b := res.cases[i].fam.bound(j)
		c, judged := res.cases[i], "the fastest Go side"
		if b.leastGap {
			c, judged = res.leastGap[i], "the smallest go-c"
		}
		cgo, from := c.cgoNS, "the case's cgo-ns/op"
		if cgo == 0 {
			cgo, from = res.cgo, "BenchmarkCgoEmpty"
		}
		limit := b.cgoCalls*cgo + b.perWR*float64(c.n)
		if d := c.gap(); d > limit {
			runs := "1 run"
			if c.runs > 1 {
				runs = fmt.Sprintf("%d runs, judged by the one with %s", c.runs, judged)
			}
			out = append(out, miss{c: c, msg: fmt.Sprintf("%s: go-c %.1f ns > %s bound %.1f ns (%g x %.1f ns cgo from %s + %g ns x %d WRs; %s)",
				c.name, d, b.name, limit, b.cgoCalls, cgo, from, b.perWR, c.n, runs)})
		}
		if c.allocs != 0 {
			out = append(out, miss{c: c, allocs: true, msg: fmt.Sprintf("%s: %.0f allocs/op > 0 (%s bound: no allocation)", c.name, c.allocs, b.name)})
		}
		if b.benchmem && !c.hasAllocs {
			out = append(out, miss{c: c, noAllocs: true, msg: fmt.Sprintf("%s: no allocs/op on the line (run go test with -benchmem)", c.name)})
		}
	}
	return out
}
