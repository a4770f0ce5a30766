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

// A server and three clients, each a process, all at once: the server
// reports every client's message, each with the QP that client is
// connected to, which is a different QP for each.
func TestSRQClients(t *testing.T) {
	const clients = 3
	addr := pairtest.Device(t)
	srv := pairtest.Start(t, "server", "-listen", addr+":0", "-n", fmt.Sprint(clients))
	at := srv.WaitLine(t, "listening on ")
	var procs []*pairtest.Proc
	msgs := make([]string, clients)
	for i := range clients {
		msgs[i] = fmt.Sprintf("client %d of test process %d", i, os.Getpid())
		procs = append(procs, pairtest.Start(t, fmt.Sprintf("client %d", i), "-msg", msgs[i], at))
	}
	froms := make([]string, clients)
	for i, p := range procs {
		out := p.Wait(t)
		for _, l := range out {
			if from, ok := strings.CutPrefix(l, "connected from "); ok {
				froms[i] = from
			}
		}
		if froms[i] == "" {
			t.Errorf("client %d did not print its address", i)
		}
		if want := fmt.Sprintf("sent %q", msgs[i]); !slices.Contains(out, want) {
			t.Errorf("client %d did not print %q", i, want)
		}
	}
	srvOut := srv.Wait(t)

	qps := make(map[string]bool)
	for i := range clients {
		// QP 17 connected to 192.0.2.1:40123, and QP 17 (192.0.2.1:40123): "client 0 ..."
		var qp string
		for _, l := range srvOut {
			if q, ok := strings.CutSuffix(l, " connected to "+froms[i]); ok {
				qp = strings.TrimPrefix(q, "QP ")
			}
		}
		if qp == "" || qps[qp] {
			t.Errorf("the server printed no QP of its own for client %d at %s (QPs seen: %v)", i, froms[i], qps)
			continue
		}
		qps[qp] = true
		if want := fmt.Sprintf("QP %s (%s): %q", qp, froms[i], msgs[i]); !slices.Contains(srvOut, want) {
			t.Errorf("the server did not print %q", want)
		}
	}
}

// Bad usage fails before any device is touched, saying what to give.
func TestUsage(t *testing.T) {
	pairtest.Start(t, "no arguments").Fails(t, "give -listen ADDR:PORT")
}

// The example uses hand/ and the standard library alone.
func TestImports(t *testing.T) { pairtest.ImportsOnly(t, "github.com/goverbs/goverbs/hand") }
