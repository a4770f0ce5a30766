package rxe

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/cmd/goverbs-perf/perf"
	"github.com/goverbs/goverbs/cmd/goverbs-perf/perf/loopallocs"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// perfChildEnv makes this test binary run goverbs-perf (perf.Main with the
// binary's arguments) instead of the tests: TestInteropPerfModes starts
// each side of a run so, in a process of its own, because the allocation
// count goverbs-perf reports for its timed loop is the process's.
const perfChildEnv = "GOVERBS_TEST_RUN_PERF"

func TestMain(m *testing.M) {
	if os.Getenv(perfChildEnv) == "1" {
		os.Exit(perf.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// goverbs-perf in each of perftest's four modes, server and client each a
// process of its own on rxe0, with perftest's defaults (one WR a post, one
// in 100 signaled) and with post lists: the client's result row must carry
// the size and the iterations asked for and a positive rate (make
// perf-compare sets the rates against perftest's), and neither side's timed
// loop may allocate.
func TestInteropPerfModes(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(perfChildEnv, "1")
	port := 18621
	for _, mode := range []string{"send_bw", "write_bw", "read_bw", "send_lat"} {
		for _, post := range []struct{ name, list, mod string }{{"defaults", "1", "100"}, {"lists", "4", "8"}} {
			t.Run(mode+"/"+post.name, func(t *testing.T) {
				port++
				ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
				defer cancel()
				args := []string{"-t", mode, "-d", device, "-x", strconv.Itoa(gidIndex), "-s", "4096", "-n", "300",
					"-p", strconv.Itoa(port), "-l", post.list, "-Q", post.mod}
				srv := tooltest.StartC(t, ctx, "Go server", self, args...)
				if err := tooltest.WaitListen(ctx, port); err != nil {
					t.Fatalf("goverbs-perf server: %v\n%s", err, srv.Wait().Out)
				}
				cli := tooltest.StartC(t, ctx, "Go client", self, append(args, localAddr())...).Wait()
				s := srv.Wait()
				t.Logf("client:\n%s\nserver:\n%s", cli.Out, s.Out)
				if cli.Failed() || s.Failed() {
					t.Fatalf("client exit %d %s, server exit %d %s", cli.ExitCode, cli.Err, s.ExitCode, s.Err)
				}
				row := resultRow(cli.Out)
				if len(row) < 5 || row[0] != "4096" || row[1] != "300" {
					t.Fatalf("client result row %q: want 4096 bytes, 300 iterations", row)
				}
				col := 4 // MsgRate[Mpps]
				if mode == "send_lat" {
					col = 2 // t_min[usec]
				}
				if v, err := strconv.ParseFloat(row[col], 64); err != nil || v <= 0 {
					t.Errorf("client result row %q: column %d is not a positive number", row, col+1)
				}
				for _, side := range []tooltest.Run{cli, s} {
					r, ok, err := loopallocs.Parse(side.Out)
					if !ok || err != nil || r.Own != 0 {
						t.Errorf("%s: heap allocations in the timed loop: %+v (reported: %v, %v), want 0 of the loop's own", side.Name, r, ok, err)
					}
				}
			})
		}
	}
}

// resultRow returns the fields of the row after perftest's "#bytes" header.
func resultRow(out string) []string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "#bytes") && i+1 < len(lines) {
			return strings.Fields(lines[i+1])
		}
	}
	return nil
}
