package rxe

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/cmd/goverbs-perf/perf"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// goverbs-perf in each of perftest's four modes, server and client in this
// process on rxe0: the client's result row must carry the size and the
// iterations asked for and a positive rate (make perf-compare sets the
// rates against perftest's).
func TestInteropPerfModes(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	port := 18621
	for _, mode := range []string{"send_bw", "write_bw", "read_bw", "send_lat"} {
		t.Run(mode, func(t *testing.T) {
			port++
			ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
			defer cancel()
			args := []string{"-t", mode, "-d", device, "-x", strconv.Itoa(gidIndex), "-s", "4096", "-n", "300",
				"-p", strconv.Itoa(port), "-l", "4", "-Q", "8"}
			type run struct {
				out  string
				code int
			}
			srv := make(chan run, 1)
			go func() {
				var out bytes.Buffer
				code := perf.Main(args, &out, &out)
				srv <- run{out.String(), code}
			}()
			if err := tooltest.WaitListen(ctx, port); err != nil {
				t.Fatalf("goverbs-perf server: %v", err)
			}
			var out bytes.Buffer
			code := perf.Main(append(args, localAddr()), &out, &out)
			var s run
			select {
			case s = <-srv:
			case <-ctx.Done():
				t.Fatalf("server did not finish; client (exit %d):\n%s", code, out.String())
			}
			t.Logf("client:\n%s\nserver:\n%s", out.String(), s.out)
			if code != 0 || s.code != 0 {
				t.Fatalf("client exit %d, server exit %d", code, s.code)
			}
			row := resultRow(out.String())
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
		})
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
