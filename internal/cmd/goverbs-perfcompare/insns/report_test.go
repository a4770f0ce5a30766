package insns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runs.txt: five fields as first written, six since the client's rate is
// kept; anything else names the file and line.
func TestReadRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runs.txt")
	require.NoError(t, os.WriteFile(path, []byte("0 c send_bw 64 5000\n2 go send_bw 64 20000 33060.5\n"), 0o644))
	runs, err := ReadRuns(path)
	require.NoError(t, err)
	require.Equal(t, []Run{{0, "c", "send_bw", 64, 5000, 0}, {2, "go", "send_bw", 64, 20000, 33060.5}}, runs)
	for _, bad := range []string{"0 c send_bw 64\n", "0 c send_bw 64 5000 fast\n", "0 c send_bw 64 5000 1 2\n"} {
		require.NoError(t, os.WriteFile(path, []byte(bad), 0o644))
		_, err := ReadRuns(path)
		require.ErrorContains(t, err, "runs.txt:1:", "%q", bad)
	}
}

// The time a message is the difference of the two runs' loops over the
// difference of their messages: what a run costs once drops out.
func TestNsPerMessage(t *testing.T) {
	// 5,000 messages in 0.2 s and 20,000 in 0.65 s: 30 us a message.
	short := Run{Iters: 5000, Rate: 5000 / 0.2}
	long := Run{Iters: 20000, Rate: 20000 / 0.65}
	require.InDelta(t, 30000, NsPerMessage(short, long), 0.1)
	require.Zero(t, NsPerMessage(Run{Iters: 5000}, long))
}

// A Recorder's runs.txt, the plugin's snapshots and each run's maps make
// per-message instructions by region and function, the once-only work of
// a run left out, and Compare prints them, C beside Go.
func TestMeasureAndCompare(t *testing.T) {
	dir := t.TempDir()
	rec := &Recorder{dir: dir}
	var err error
	rec.runs, err = os.Create(filepath.Join(dir, "runs.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kallsyms"),
		[]byte("ffffffff81000000 T k_send\nffffffff81001000 T k_recv\nffffffff81002000 D data\n"), 0o644))

	// Three blocks: 10 instructions in k_send, 5 in the tool's binary
	// (no file: no function), 2 in a library. Per message, C runs them
	// 1, 4 and 2 times, Go 2, 3 and 0 times, and every run costs the same
	// once-only 7 executions of each block.
	const (
		kern = 0xffffffff81000010
		bin  = 0x400100
		lib  = 0x7f0000000100
	)
	blocks := []struct {
		addr  uint64
		insns uint64
	}{{kern, 10}, {bin, 5}, {lib, 2}}
	perMsg := map[string][3]uint64{"c": {1, 4, 2}, "go": {2, 3, 0}}
	maps := "00400000-00401000 r-xp 00000000 00:1f 12 /nonexistent/tool\n" +
		"7f0000000000-7f0000001000 r-xp 00000000 00:1f 13 /nonexistent/libfoo.so.1\n"
	var snaps strings.Builder
	var total [3]uint64
	snap := 0
	mark := func() {
		fmt.Fprintf(&snaps, "snap %d\n", snap)
		for i, b := range blocks {
			fmt.Fprintf(&snaps, "%d %x %d %d\n", i, b.addr, b.insns, total[i])
		}
		snap++
	}
	mark()
	for _, tool := range []string{"c", "go"} {
		for _, n := range []int{10, 40} {
			require.NoError(t, os.WriteFile(rec.MapsPath(), []byte(maps), 0o644))
			for i := range blocks {
				total[i] += 7 + uint64(n)*perMsg[tool][i]
			}
			mark()
			require.NoError(t, rec.Record(Run{Tool: tool, Mode: "rt", Size: 64, Iters: n, Rate: float64(n) / (0.4 + 0.01*float64(n))}))
			total[0] += 1000 // between runs: not counted
			mark()
		}
	}
	require.NoError(t, rec.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snaps.txt"), []byte(snaps.String()), 0o644))

	rows, err := Measure(dir, func(tool, fn string) string { return "binary of " + tool + fn })
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "rt", rows[0].Mode)
	c, g := rows[0].Tools["c"], rows[0].Tools["go"]
	require.InDeltaMapValues(t, map[string]float64{"kernel": 10, "binary of c": 20, "libfoo.so.1": 4}, c.Regions, 1e-9)
	require.InDeltaMapValues(t, map[string]float64{"kernel": 20, "binary of go": 15, "libfoo.so.1": 0}, g.Regions, 1e-9)
	require.InDelta(t, 10, c.Funcs["kernel k_send"], 1e-9)
	require.InDelta(t, 15, g.Funcs["binary of go ?"], 1e-9)
	require.InDelta(t, 1e7, c.Ns, 1e-3) // 10 ms a message, beside 0.4 s a run

	var out strings.Builder
	Compare(&out, c, g, false, 1, "kernel")
	require.Contains(t, out.String(), "  all                                  34         35         +1\n")
	require.Contains(t, out.String(), "  kernel                               10         20        +10\n")
	require.Contains(t, out.String(), "kernel k_send")
	require.Contains(t, out.String(), "  libfoo.so.1                           4          0         -4\n")
	require.NotContains(t, out.String(), "ns (the client's rates)")
	// A region neither ran in is left out.
	out.Reset()
	c.Regions["libbar.so.1"], g.Regions["libbar.so.1"] = 0.4, -0.3
	Compare(&out, c, g, true, 0, "")
	require.NotContains(t, out.String(), "libbar")
	require.Contains(t, out.String(), "ns (the client's rates)")

	// A tool with one run is an error that names the row.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "runs.txt"), []byte("0 c rt 64 10 10\n"), 0o644))
	_, err = Measure(dir, func(tool, fn string) string { return tool })
	require.ErrorContains(t, err, "rt 64 c: want two runs")
}
