package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/examples/internal/pairtest"
)

func TestMain(m *testing.M) { pairtest.Main(m, main) }

// A server and a client, each a process: the client prints what the
// server offered, read from the buffer the server advertised.
func TestReadPair(t *testing.T) {
	addr := pairtest.Device(t)
	msg := fmt.Sprintf("offered by server process of test %d", os.Getpid())
	srv := pairtest.Start(t, "server", "-listen", addr+":0", "-msg", msg)
	at := srv.WaitLine(t, "listening on ")
	cli := pairtest.Start(t, "client", at)
	cliOut, srvOut := cli.Wait(t), srv.Wait(t)

	// offered 44 bytes to 10.0.2.15:39917: 44 bytes at 0x7f..., rkey 0x1234
	prefix := fmt.Sprintf("offered %d bytes to ", len(msg))
	i := slices.IndexFunc(srvOut, func(l string) bool { return strings.HasPrefix(l, prefix) })
	if i < 0 {
		t.Fatalf("the server did not print %q", prefix)
	}
	_, offer, ok := strings.Cut(srvOut[i], ": ")
	if !ok || !strings.HasPrefix(offer, fmt.Sprintf("%d bytes at 0x", len(msg))) {
		t.Errorf("the server's offer %q does not describe %d bytes", srvOut[i], len(msg))
	}
	want := fmt.Sprintf("read %s: %q", offer, msg)
	if !slices.Contains(cliOut, want) {
		t.Errorf("the client did not print %q", want)
	}
	if !slices.Contains(srvOut, "client disconnected") {
		t.Error("the server did not see the client hang up")
	}
}

// Bad usage fails before any device is touched, saying what to give.
func TestUsage(t *testing.T) {
	pairtest.Start(t, "no arguments").Fails(t, "give -listen ADDR:PORT")
}

// The example uses hand/ and the standard library alone.
func TestImports(t *testing.T) { pairtest.ImportsOnly(t, "github.com/goverbs/goverbs/hand") }
