// Command goverbs-perf measures RC bandwidth and latency over verbs in the
// modes of perftest's ib_send_bw, ib_write_bw, ib_read_bw and ib_send_lat,
// and prints its results in perftest's units and column names. It talks to
// itself, not to perftest: run a server and a client.
//
//	goverbs-perf -t write_bw -d rxe0 -x 1 -s 4096            # server
//	goverbs-perf -t write_bw -d rxe0 -x 1 -s 4096 192.0.2.1  # client
//
// See package perf for the flags.
package main

import (
	"os"

	"github.com/goverbs/goverbs/internal/perf"
)

func main() {
	os.Exit(perf.Main(os.Args[1:], os.Stdout, os.Stderr))
}
