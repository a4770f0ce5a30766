package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/examples/internal/pairtest"
)

func TestMain(m *testing.M) { pairtest.Main(m, main) }

// A server and a client, each a process: both run the loop of each way of
// waiting to its end, each round trip's message checked by its number on
// both sides, and print a timing line for each, in order. The timings
// themselves are not checked: they depend on the machine.
func TestPollWaitPair(t *testing.T) {
	const iters, size = 100, 100
	addr := pairtest.Device(t)
	args := []string{"-n", fmt.Sprint(iters), "-s", fmt.Sprint(size)}
	srv := pairtest.Start(t, "server", append(args, "-listen", addr+":0")...)
	at := srv.WaitLine(t, "listening on ")
	cli := pairtest.Start(t, "client", append(args, at)...)
	cliOut, srvOut := cli.Wait(t), srv.Wait(t)
	for _, side := range []struct {
		name string
		out  []string
	}{{"client", cliOut}, {"server", srvOut}} {
		var modes []string
		for _, l := range side.out {
			if strings.HasPrefix(l, "listening on ") {
				continue
			}
			// spin   100 round trips of 100 bytes: 41.3 us each, 99% of a CPU
			var mode string
			var n, s int
			var us, cpu float64
			_, err := fmt.Sscanf(l, "%s %d round trips of %d bytes: %g us each, %g%% of a CPU", &mode, &n, &s, &us, &cpu)
			if err != nil || n != iters || s != size || us <= 0 || cpu < 0 {
				t.Errorf("%s printed %q, not a timing line of %d round trips of %d bytes (%v)", side.name, l, iters, size, err)
			}
			modes = append(modes, mode)
		}
		if got := strings.Join(modes, " "); got != "spin wait thread" {
			t.Errorf("%s printed timings for %q, want spin wait thread", side.name, got)
		}
	}
}

// Bad usage fails before any device is touched, saying what to give.
func TestUsage(t *testing.T) {
	pairtest.Start(t, "no arguments").Fails(t, "give -listen ADDR:PORT")
}

// The example uses hand/ and the standard library alone.
func TestImports(t *testing.T) { pairtest.ImportsOnly(t, "github.com/goverbs/goverbs/hand") }
