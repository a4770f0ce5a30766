package main

import (
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/goverbs/goverbs/examples/internal/pairtest"
)

func TestMain(m *testing.M) { pairtest.Main(m, main) }

// A server and a client, each a process: 64 MiB up and 64 MiB down, each
// with the same SHA-256 on both sides, then 300 small requests on pooled
// connections; both exit 0 once the client has asked the server to stop,
// and agree on the requests made.
func TestHTTPPair(t *testing.T) {
	addr := pairtest.Device(t)
	const size, small = 64 << 20, 300
	// Under emulation 64 MiB each way takes minutes, not seconds.
	const timeout = 6 * time.Minute
	srv := pairtest.StartTimeout(t, timeout, "server", "-listen", addr+":0", "-timeout", timeout.String())
	at := srv.WaitLine(t, "listening on ")
	cli := pairtest.StartTimeout(t, timeout, "client", "-size", fmt.Sprint(size), "-small", fmt.Sprint(small), "-timeout", timeout.String(), at)
	cliOut, srvOut := cli.Wait(t), srv.Wait(t)

	for _, re := range []string{
		fmt.Sprintf(`^uploaded %d bytes in \S+, SHA-256 [0-9a-f]{64} on both sides$`, size),
		fmt.Sprintf(`^downloaded %d bytes in \S+, SHA-256 [0-9a-f]{64} on both sides$`, size),
		fmt.Sprintf(`^%d small requests in \S+$`, small),
	} {
		if !slices.ContainsFunc(cliOut, regexp.MustCompile(re).MatchString) {
			t.Errorf("the client printed no line matching %s", re)
		}
	}
	// "1003 requests on at most 9 connections": the client's dials that
	// completed; the server saw every request, on as many connections or
	// fewer (a dial the Transport no longer needed may not be served).
	var reqs, dials, served, conns int
	for _, l := range cliOut {
		if _, err := fmt.Sscanf(l, "%d requests on at most %d connections", &reqs, &dials); err == nil {
			break
		}
	}
	for _, l := range srvOut {
		if _, err := fmt.Sscanf(l, "served %d requests on %d connections", &served, &conns); err == nil {
			break
		}
	}
	if reqs != small+3 || served != reqs || conns < 1 || conns > dials {
		t.Errorf("the client made %d requests on at most %d connections, the server served %d on %d; want %d requests on both sides, on 1 to %d connections",
			reqs, dials, served, conns, small+3, dials)
	}
}

// Bad usage fails before any device is touched, saying what to give.
func TestUsage(t *testing.T) {
	pairtest.Start(t, "no arguments").Fails(t, "give -listen ADDR:PORT")
}

// A server that cannot listen says why and exits 1.
func TestListenError(t *testing.T) {
	pairtest.Start(t, "server on no address", "-listen", "not-an-address").Fails(t, "rsockethttp: ")
}

// The example uses rsocket/ and the standard library alone.
func TestImports(t *testing.T) { pairtest.ImportsOnly(t, "github.com/goverbs/goverbs/rsocket") }
