package main

import (
	"bytes"
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

	m := misses(res)
	require.Len(t, m, 2, "poll_cq/64: 200 ns over a 69.5 ns budget, and 1 alloc")
	require.Contains(t, m[0], "poll_cq/64: go-c 200.0 ns > 69.5 ns")
	require.Contains(t, m[1], "1 allocs/op")
}

func TestBudgetFallsBackToTheCgoLine(t *testing.T) {
	res := result{cgo: 40, cases: []caseRatio{{name: "x/8", n: 8, goNS: 150, cNS: 96}}}
	require.Empty(t, misses(res), "54 ns is within 1.25 x 40 + 4")
	res.cases[0].goNS = 151
	require.Len(t, misses(res), 1)
}

func TestParseFailures(t *testing.T) {
	_, failed, err := parse(strings.NewReader("--- FAIL: TestX\nFAIL\n"), &bytes.Buffer{})
	require.NoError(t, err)
	require.True(t, failed)

	_, _, err = parse(strings.NewReader("PASS\n"), &bytes.Buffer{})
	require.Error(t, err, "no cases")
}
