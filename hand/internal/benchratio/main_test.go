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
BenchmarkCgoEmpty-2                  	31030074	        36.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkFast/post_recv/32/go-2      	 2000000	       412.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFast/post_recv/32/c-2       	 2000000	       371.0 ns/op
BenchmarkFast/poll_cq/64/go-2        	 2000000	       950.0 ns/op	       900.0 cpu-ns/op	      64 B/op	       1 allocs/op
BenchmarkFast/poll_cq/64/c-2         	 2000000	       800.0 ns/op	       700.0 cpu-ns/op
BenchmarkFast/post_recv/32/go-2      	 2000000	       414.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFast/post_recv/32/c-2       	 2000000	       373.0 ns/op
BenchmarkFast/post_recv/32/go-2      	 2000000	       500.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFast/post_recv/32/c-2       	 2000000	       369.0 ns/op
BenchmarkNaive/post_recv/32-2        	 2000000	      1500 ns/op	     900 B/op	       3 allocs/op
PASS
ok  	github.com/goverbs/goverbs/hand	12.3s
`

func TestParseEchoesAndPairs(t *testing.T) {
	var echo, out bytes.Buffer
	res, failed, err := parse(strings.NewReader(sampleRun), &echo)
	require.NoError(t, err)
	require.False(t, failed)
	require.Equal(t, sampleRun, echo.String())
	write(&out, res)
	require.Equal(t, "cgo 36.0\n"+
		"ratio post_recv/32 412 369 1.12 0\n"+
		"ratio poll_cq/64 900 700 1.29 1\n", out.String())

	m := misses(res)
	require.Len(t, m, 2, "poll_cq/64: 200 ns over a 77 ns budget, and 1 alloc")
	require.Contains(t, m[0], "poll_cq/64")
}

func TestParseFailures(t *testing.T) {
	_, failed, err := parse(strings.NewReader("--- FAIL: TestX\nFAIL\n"), &bytes.Buffer{})
	require.NoError(t, err)
	require.True(t, failed)

	_, _, err = parse(strings.NewReader("PASS\n"), &bytes.Buffer{})
	require.Error(t, err, "no pairs")
}
