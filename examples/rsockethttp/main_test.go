package main

import (
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/goverbs/goverbs/examples/internal/pairtest"
)

func TestMain(m *testing.M) { pairtest.Main(m, main) }

// A server and a client, each a process: 64 MiB up and 64 MiB down, each
// with the same SHA-256 on both sides, then 1,000 small requests on pooled
// connections; both exit 0 once the client has asked the server to stop,
// and agree on the requests made.
func TestHTTPPair(t *testing.T) {
	addr := pairtest.Device(t)
	const size, small = 64 << 20, 1000
	srv := pairtest.Start(t, "server", "-listen", addr+":0")
	at := srv.WaitLine(t, "listening on ")
	cli := pairtest.Start(t, "client", "-size", fmt.Sprint(size), "-small", fmt.Sprint(small), at)
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
	// "1003 requests on 8 connections": at most 8 at a time, so at most 8
	// dialled, and the server saw every request on as many connections.
	var reqs, conns int
	for _, l := range cliOut {
		if _, err := fmt.Sscanf(l, "%d requests on %d connections", &reqs, &conns); err == nil {
			break
		}
	}
	if reqs != small+3 || conns < 1 || conns > 8 {
		t.Errorf("the client made %d requests on %d connections; want %d on 1 to 8", reqs, conns, small+3)
	}
	if want := fmt.Sprintf("served %d requests on %d connections", reqs, conns); !slices.Contains(srvOut, want) {
		t.Errorf("the server did not print %q", want)
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
