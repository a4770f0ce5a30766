// Command goverbs-rping is rping over goverbs: an rdma_cm ping where the
// server RDMA-reads the client's ping buffer and RDMA-writes it back into
// the client's sink buffer, wire-compatible with rdma-core's rping, so
// either side may be this program or the C one.
//
//	goverbs-rping -s -a 192.0.2.1 -v           # server
//	goverbs-rping -c -a 192.0.2.1 -C 10 -v -V  # client
//
// See package rping for the protocol and the flags.
package main

import (
	"os"

	"github.com/goverbs/goverbs/internal/rping"
)

func main() {
	os.Exit(rping.Main(os.Args[1:], os.Stdout, os.Stderr))
}
