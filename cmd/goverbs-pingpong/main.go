// Command goverbs-pingpong is an RC ping-pong over verbs, wire-compatible
// with rdma-core's ibv_rc_pingpong: either side may be this program or the C
// one. Without a host argument it waits for a client; with one it connects.
//
//	goverbs-pingpong -d rxe0 -g 1                # server
//	goverbs-pingpong -d rxe0 -g 1 192.0.2.1      # client
//
// The two sides exchange LID, QP number, PSN and GID over TCP (port 18515)
// in ibv_rc_pingpong's text format, connect their QPs, then bounce -s bytes
// back and forth -n times and print the same summary lines as the C tool.
// See package pingpong for the flags and what is not implemented.
package main

import (
	"os"

	"github.com/goverbs/goverbs/internal/pingpong"
)

func main() {
	os.Exit(pingpong.Main(os.Args[1:], os.Stdout, os.Stderr))
}
