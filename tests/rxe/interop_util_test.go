package rxe

// What the interop tests (the Go tools against rdma-core's C tools on the
// same rxe device, one side in this process, the other a child) share
// beyond package tooltest.

import (
	"os"
	"time"
)

// interopTimeout bounds each interop run; under TCG a 1000-iteration
// ping-pong takes well under a second, rping's connection set-up a few.
const interopTimeout = 90 * time.Second

// localAddr is an address of this host for the TCP side channel and for
// rdma_cm: veth0's, under rxe0.
func localAddr() string {
	if a := os.Getenv("RXE_ADDR"); a != "" {
		return a
	}
	return "192.0.2.1"
}
