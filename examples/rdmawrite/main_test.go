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

// A server and a client, each a process: the server prints the message
// the client wrote into the buffer it advertised, and the client wrote to
// the address and rkey the server offered.
func TestWritePair(t *testing.T) {
	addr := pairtest.Device(t)
	msg := fmt.Sprintf("written by a client of test process %d", os.Getpid())
	srv := pairtest.Start(t, "server", "-listen", addr+":0")
	at := srv.WaitLine(t, "listening on ")
	cli := pairtest.Start(t, "client", "-msg", msg, at)
	cliOut, srvOut := cli.Wait(t), srv.Wait(t)

	// offered 4096 bytes at 0x7f..., rkey 0x1234 to 10.0.2.15:39917
	offered := lineWith(srvOut, "offered 4096 bytes at ")
	where, client, ok := strings.Cut(strings.TrimPrefix(offered, "offered 4096 bytes"), " to ")
	if !ok {
		t.Fatalf("the server printed no offer of its 4096 bytes")
	}
	// wrote 38 bytes at 0x7f..., rkey 0x1234
	if want := fmt.Sprintf("wrote %d bytes%s", len(msg), where); !slices.Contains(cliOut, want) {
		t.Errorf("the client did not print %q", want)
	}
	if want := fmt.Sprintf("%s wrote %d bytes: %q", client, len(msg), msg); !slices.Contains(srvOut, want) {
		t.Errorf("the server did not print %q", want)
	}
}

// lineWith returns the first line that starts with prefix, or "".
func lineWith(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// Bad usage fails before any device is touched, saying what to give.
func TestUsage(t *testing.T) {
	pairtest.Start(t, "no arguments").Fails(t, "give -listen ADDR:PORT")
}

// The example uses hand/ and the standard library alone.
func TestImports(t *testing.T) { pairtest.ImportsOnly(t, "github.com/goverbs/goverbs/hand") }
