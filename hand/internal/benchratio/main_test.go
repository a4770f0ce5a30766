package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sampleRun = `goos: linux
goarch: amd64
pkg: github.com/goverbs/goverbs/hand
cpu: AMD EPYC
BenchmarkCgoEmpty-2                  	31030074	        40.00 ns/op	        37.00 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkFast/post_recv/32-2         	 2000000	       900.0 ns/op	       371.0 c-ns/op	        36.0 cgo-ns/op	       412.0 go-ns/op	       0 B/op	       0 allocs/op
BenchmarkFast/poll_cq/64-2           	 2000000	      1700 ns/op	       700.0 c-ns/op	        30.0 cgo-ns/op	       900.0 go-ns/op	      64 B/op	       1 allocs/op
BenchmarkCgoEmpty-2                  	31030074	        36.00 ns/op	        36.00 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkFast/post_recv/32-2         	 2000000	       950.0 ns/op	       390.0 c-ns/op	        37.0 cgo-ns/op	       430.0 go-ns/op	       0 B/op	       0 allocs/op
BenchmarkFast/post_recv/32-2         	 2000000	       800.0 ns/op	       369.0 c-ns/op	        35.0 cgo-ns/op	       410.0 go-ns/op	       0 B/op	       0 allocs/op
BenchmarkFast/poll_cq/64-2           	 2000000	      1600 ns/op	       690.0 c-ns/op	        30.0 cgo-ns/op	       905.0 go-ns/op	       0 B/op	       0 allocs/op
BenchmarkNaive/post_recv/32-2        	 2000000	      1500 ns/op	      1400 cpu-ns/op	     900 B/op	       3 allocs/op
PASS
ok  	github.com/goverbs/goverbs/hand	12.3s
`

func TestParseEchoesAndSummarizes(t *testing.T) {
	var echo, out bytes.Buffer
	res, failed, err := parse(strings.NewReader(sampleRun), &echo)
	require.NoError(t, err)
	require.False(t, failed)
	require.Equal(t, sampleRun, echo.String())
	write(&out, res)
	require.Equal(t, "cgo 36.0\n"+
		"ratio post_recv/32 410 369 1.11 0\n"+ // the run with the fastest Go side
		"ratio poll_cq/64 900 700 1.29 1\n", // allocs: the largest seen
		out.String())

	m := misses(res, checkBound)
	require.Len(t, m, 2, "poll_cq/64: 200 ns over a 69.5 ns budget, and 1 alloc")
	require.Equal(t, "poll_cq/64: go-c 200.0 ns > check bound 69.5 ns (1.25 x 30.0 ns cgo from the case's cgo-ns/op + 0.5 ns x 64 WRs)", m[0].msg)
	require.Equal(t, "poll_cq/64: 1 allocs/op > 0 (check bound: no allocation)", m[1].msg)

	m = misses(res, gateBound)
	require.Len(t, m, 2, "poll_cq/64: 200 ns over the gate's 124 ns, and 1 alloc")
	require.Equal(t, "poll_cq/64: go-c 200.0 ns > gate bound 124.0 ns (2 x 30.0 ns cgo from the case's cgo-ns/op + 1 ns x 64 WRs)", m[0].msg)
	require.True(t, m[1].allocs)
}

func TestBudgetFallsBackToTheCgoLine(t *testing.T) {
	res := result{cgo: 40, cases: []caseRatio{{name: "x/8", n: 8, goNS: 150, cNS: 96, hasAllocs: true}}}
	require.Empty(t, misses(res, checkBound), "54 ns is within 1.25 x 40 + 4")
	res.cases[0].goNS = 151
	require.Len(t, misses(res, checkBound), 1)
	require.Contains(t, misses(res, checkBound)[0].msg, "40.0 ns cgo from BenchmarkCgoEmpty")

	res.cases[0].goNS = 96 + 88
	require.Empty(t, misses(res, gateBound), "88 ns is within 2 x 40 + 8")
	res.cases[0].goNS++
	require.Len(t, misses(res, gateBound), 1)
}

// The gate judges only lines it can: without -benchmem it cannot see an
// allocation, so a case without allocs/op fails it (not -check, as before).
func TestGateWantsBenchmem(t *testing.T) {
	res := result{cases: []caseRatio{{name: "x/1", n: 1, goNS: 40, cNS: 10, cgoNS: 25}}}
	require.Empty(t, misses(res, checkBound))
	m := misses(res, gateBound)
	require.Len(t, m, 1)
	require.True(t, m[0].noAllocs)
	require.Contains(t, m[0].msg, "-benchmem")
}

// gateRun is a run of two cases: post_recv/1 within the gate's bound
// (go-c 30 <= 2 x 25 + 1) and poll_cq/64 at goNS over it (bound 2 x 30 + 64).
func gateRun(goNS string, allocs string) string {
	return "BenchmarkFast/post_recv/1-2  1000  90 ns/op  10 c-ns/op  25 cgo-ns/op  40 go-ns/op  0 B/op  0 allocs/op\n" +
		"BenchmarkFast/poll_cq/64-2  1000  1700 ns/op  700 c-ns/op  30 cgo-ns/op  " + goNS + " go-ns/op  0 B/op  " + allocs + " allocs/op\n" +
		"PASS\n"
}

func TestGateExitCodes(t *testing.T) {
	retry := filepath.Join(t.TempDir(), "retry")
	for _, tc := range []struct {
		name, in string
		args     []string
		code     int
		stderr   string
	}{
		{"within", gateRun("824", "0"), []string{"-gate"}, 0, "gate passed: 2 cases"},
		{"slow", gateRun("825", "0"), []string{"-gate"}, exitMissed, "gate failed: poll_cq/64: go-c 125.0 ns > gate bound 124.0 ns"},
		{"slow, retry", gateRun("825", "0"), []string{"-gate", "-retry", retry}, exitRetry,
			"over the gate's time bound, to run again: poll_cq/64: go-c 125.0 ns > gate bound 124.0 ns"},
		// An allocation fails at once, retry or not.
		{"allocates", gateRun("800", "1"), []string{"-gate", "-retry", retry}, exitMissed, "gate failed: poll_cq/64: 1 allocs/op > 0 (gate bound: no allocation)"},
		{"slow and allocates", gateRun("900", "1"), []string{"-gate", "-retry", retry}, exitMissed, "allocs/op"},
		{"failed run", gateRun("800", "0") + "--- FAIL: BenchmarkFast\n", []string{"-gate", "-retry", retry}, exitMissed, "the benchmark run failed"},
		{"no benchmem", "BenchmarkFast/post_recv/1-2  1000  90 ns/op  10 c-ns/op  25 cgo-ns/op  40 go-ns/op\n",
			[]string{"-gate", "-retry", retry}, exitMissed, "-benchmem"},
		// -check keeps its own, stricter bound: 60 ns over 1.25 x 30 + 32.
		{"check", gateRun("824", "0"), []string{"-check"}, exitMissed, "target missed: poll_cq/64: go-c 124.0 ns > check bound 69.5 ns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(retry)
			var stdout, stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(tc.in), &stdout, &stderr)
			require.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			require.Contains(t, stderr.String(), tc.stderr)
			pat, err := os.ReadFile(retry)
			if code != exitRetry {
				require.ErrorIs(t, err, os.ErrNotExist, "a retry file only for exit 2")
				return
			}
			require.NotContains(t, stderr.String(), "gate failed", "a case to run again has not failed yet")
			require.NoError(t, err)
			require.Equal(t, "^BenchmarkFast$/^poll_cq$/^64$\n", string(pat))
		})
	}
}

// A usage error is not the gate's "run the slow cases again" (exit 2),
// which make bench-gate acts on.
func TestUsageErrorIsNotRetry(t *testing.T) {
	for _, args := range [][]string{{"-nosuchflag"}, {"-retry", "x"}} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, exitUsage, run(args, strings.NewReader(gateRun("824", "0")), &stdout, &stderr), "%q", args)
	}
}

func TestBriefLeavesOutBenchmarkLines(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-brief"}, strings.NewReader(sampleRun), &stdout, &stderr))
	require.NotContains(t, stdout.String(), "BenchmarkFast")
	require.Contains(t, stdout.String(), "goos: linux\n")
	require.Contains(t, stdout.String(), "ratio post_recv/32 410 369 1.11 0\n")
}

func TestBenchPattern(t *testing.T) {
	require.Equal(t, "^BenchmarkFast$/^post_recv$/^1$|^BenchmarkFast$/^poll_cq$/^16$",
		benchPattern([]caseRatio{{name: "post_recv/1"}, {name: "poll_cq/16"}}))
}

// TestGateCatchesInjectedAlloc is the gate's proof that it can fail: it runs
// two fast-path cases of ./hand/ with GOVERBS_BENCH_INJECT=alloc (every Go
// side allocates once per op), selected with the pattern the gate's retry
// uses, and pipes the output through -gate, which must exit 1 naming both
// cases and their allocation. The same cases without the knob allocate
// nothing. Time bounds are not asserted: they depend on the machine's load.
func TestGateCatchesInjectedAlloc(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test -bench on ./hand/ (a few seconds); run without -short")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to run the benchmarks with")
	}
	cases := []caseRatio{{name: "post_recv/1"}, {name: "post_send_inline/8"}}
	bench := func(inject string) string {
		cmd := exec.Command(goCmd, "test", "-run", "^$", "-bench", benchPattern(cases),
			"-benchmem", "-benchtime", "20ms", "github.com/goverbs/goverbs/hand")
		cmd.Env = append(os.Environ(), "GOVERBS_BENCH_INJECT="+inject)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}

	out := bench("alloc")
	var stdout, stderr bytes.Buffer
	code := run([]string{"-gate", "-retry", filepath.Join(t.TempDir(), "retry")}, strings.NewReader(out), &stdout, &stderr)
	require.Equal(t, exitMissed, code, "the gate passed an allocating run:\n%s\n%s", out, stderr.String())
	require.Contains(t, stderr.String(), "gate failed: post_recv/1: 1 allocs/op > 0")
	require.Contains(t, stderr.String(), "gate failed: post_send_inline/8: 1 allocs/op > 0")
	require.Contains(t, stdout.String(), "ratio post_recv/1 ")
	require.NotContains(t, stdout.String(), "ratio post_recv/8 ", "the pattern selects just the two cases")
	t.Logf("injected allocation:\n%s", stderr.String())

	res, failed, err := parse(strings.NewReader(bench("")), io.Discard)
	require.NoError(t, err)
	require.False(t, failed)
	require.Len(t, res.cases, 2)
	for _, c := range res.cases {
		require.True(t, c.hasAllocs)
		require.Zero(t, c.allocs, "%s allocates without the knob", c.name)
	}
}

func TestParseFailures(t *testing.T) {
	_, failed, err := parse(strings.NewReader("--- FAIL: TestX\nFAIL\n"), &bytes.Buffer{})
	require.NoError(t, err)
	require.True(t, failed)

	_, _, err = parse(strings.NewReader("PASS\n"), &bytes.Buffer{})
	require.Error(t, err, "no cases")
}
