// Command goverbs-cmtime times rdma_cm connection setup step by step, as
// rdma-core's cmtime does, and speaks to it: either side may be this
// program or the C one. See package cmtime for the flags and the output.
//
//	goverbs-cmtime -c 100                    # server
//	goverbs-cmtime -s 192.0.2.1 -c 100       # client over hand
//	goverbs-cmtime -compare -runs 5 -c 100   # C's cmtime against this one (make perf-cmtime)
package main

import (
	"os"

	"github.com/goverbs/goverbs/internal/cmtime"
)

func main() {
	os.Exit(cmtime.Main(os.Args[1:], os.Stdout, os.Stderr))
}
