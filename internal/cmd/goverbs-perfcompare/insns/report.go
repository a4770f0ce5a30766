package insns

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PerTool is one tool's instructions per message in a row, from its two
// runs.
type PerTool struct {
	Regions map[string]float64 // by region: "kernel", a library's base name, the tool's binary as named by Measure's caller
	Funcs   map[string]float64 // by "region function"
	Ns      float64            // time a message by the clients' rates (NsPerMessage); 0 if not kept
}

// Row is the instructions per message of every tool that ran a mode at a
// size.
type Row struct {
	Mode  string
	Size  int
	Tools map[string]PerTool // by Run.Tool
}

// Measure reads a -insns directory (a Recorder's files and the plugin's
// snaps.txt) and returns its rows in runs.txt's order. Each tool of a row
// must have run exactly twice, at growing message counts: a message's
// instructions are the difference of the two (PerMessage). binary names
// the region of an address in the tool's own executable, given the tool
// and the function there ("" when unknown); the kernel, the vDSO and
// shared libraries are regions of their own.
func Measure(dir string, binary func(tool, fn string) string) ([]Row, error) {
	runs, err := ReadRuns(filepath.Join(dir, "runs.txt"))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, "snaps.txt"))
	if err != nil {
		return nil, err
	}
	intervals, err := Intervals(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("snaps.txt: %w", err)
	}
	f, err = os.Open(filepath.Join(dir, "kallsyms"))
	if err != nil {
		return nil, err
	}
	kernel, err := ReadKallsyms(f)
	f.Close()
	if err != nil {
		return nil, err
	}

	type rowKey struct {
		mode string
		size int
	}
	var order []rowKey
	byRun := map[rowKey]map[string][]Run{}
	for _, r := range runs {
		k := rowKey{r.Mode, r.Size}
		if byRun[k] == nil {
			byRun[k] = map[string][]Run{}
			order = append(order, k)
		}
		byRun[k][r.Tool] = append(byRun[k][r.Tool], r)
	}
	var rows []Row
	for _, k := range order {
		row := Row{Mode: k.mode, Size: k.size, Tools: map[string]PerTool{}}
		for tool, rs := range byRun[k] {
			if len(rs) != 2 || rs[0].Iters >= rs[1].Iters {
				return nil, fmt.Errorf("%s %d %s: want two runs of growing iterations, have %d", k.mode, k.size, tool, len(rs))
			}
			var regions, funcs [2]map[string]uint64
			for i, r := range rs {
				if r.Interval >= len(intervals) {
					return nil, fmt.Errorf("run %d: snaps.txt has only %d intervals", r.Interval, len(intervals))
				}
				mf, err := os.Open(filepath.Join(dir, fmt.Sprintf("run-%d.maps", r.Interval)))
				if err != nil {
					return nil, err
				}
				maps, err := ReadMaps(mf)
				mf.Close()
				if err != nil {
					return nil, fmt.Errorf("run-%d.maps: %w", r.Interval, err)
				}
				s := &Symbolizer{Kernel: kernel, Maps: maps}
				where := func(a uint64) (string, string) {
					region, fn := s.Where(a)
					if region == "kernel" || region == "[vdso]" || region == "unmapped" || strings.Contains(region, ".so") {
						return region, fn
					}
					return binary(tool, fn), fn
				}
				c := intervals[r.Interval]
				regions[i] = c.By(func(a uint64) string { region, _ := where(a); return region })
				funcs[i] = c.By(func(a uint64) string {
					region, fn := where(a)
					return region + " " + cmp.Or(fn, "?")
				})
			}
			row.Tools[tool] = PerTool{
				Regions: PerMessage(regions[0], regions[1], rs[0].Iters, rs[1].Iters),
				Funcs:   PerMessage(funcs[0], funcs[1], rs[0].Iters, rs[1].Iters),
				Ns:      NsPerMessage(rs[0], rs[1]),
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// NsPerMessage is the time a message of the two runs' difference, from
// the clients' rates (messages over the timed loop); 0 if a rate is not
// known.
func NsPerMessage(short, long Run) float64 {
	if short.Rate <= 0 || long.Rate <= 0 {
		return 0
	}
	return (float64(long.Iters)/long.Rate - float64(short.Iters)/short.Rate) / float64(long.Iters-short.Iters) * 1e9
}

// Compare writes the table of a row's two tools c and g (the columns C,
// Go and Go-C): all instructions, then, when showNs and both times are
// known, each one's time a message and that time less its instructions
// (under -icount shift=0 an instruction advances guest time by 1 ns, so
// the two should agree; where they part, guest time passed that the plugin
// did not count, such as a halted vCPU), then each region where either
// ran instructions (one or more a message), then the top
// functions whose "region function" contains filter, largest |Go-C| first.
func Compare(w io.Writer, c, g PerTool, showNs bool, top int, filter string) {
	fmt.Fprintf(w, "  %-28s %10s %10s %10s\n", "region", "C", "Go", "Go-C")
	sum := func(m map[string]float64) (t float64) {
		for _, v := range m {
			t += v
		}
		return t
	}
	fmt.Fprintf(w, "  %-28s %10.0f %10.0f %+10.0f\n", "all", sum(c.Regions), sum(g.Regions), sum(g.Regions)-sum(c.Regions))
	if showNs && c.Ns > 0 && g.Ns > 0 {
		fmt.Fprintf(w, "  %-28s %10.0f %10.0f %+10.0f\n", "ns (the client's rates)", c.Ns, g.Ns, g.Ns-c.Ns)
		fmt.Fprintf(w, "  %-28s %10.0f %10.0f %+10.0f\n", "ns - all", c.Ns-sum(c.Regions), g.Ns-sum(g.Regions), (g.Ns-sum(g.Regions))-(c.Ns-sum(c.Regions)))
	}
	for _, r := range unionKeys(c.Regions, g.Regions) {
		if math.Abs(c.Regions[r]) < 0.5 && math.Abs(g.Regions[r]) < 0.5 {
			continue // a library loaded and not run, as the providers of other devices
		}
		fmt.Fprintf(w, "  %-28s %10.0f %10.0f %+10.0f\n", r, c.Regions[r], g.Regions[r], g.Regions[r]-c.Regions[r])
	}
	fmt.Fprintf(w, "  functions where Go and C differ most (the tool's own are its binary's):\n")
	fns := slices.DeleteFunc(unionKeys(c.Funcs, g.Funcs), func(fn string) bool { return !strings.Contains(fn, filter) })
	slices.SortStableFunc(fns, func(a, b string) int {
		da, db := g.Funcs[a]-c.Funcs[a], g.Funcs[b]-c.Funcs[b]
		return cmp.Compare(max(db, -db), max(da, -da))
	})
	for _, fn := range fns[:min(len(fns), top)] {
		fmt.Fprintf(w, "  %-60s %8.0f %8.0f %+8.0f\n", fn, c.Funcs[fn], g.Funcs[fn], g.Funcs[fn]-c.Funcs[fn])
	}
}

// unionKeys are the keys of a and b, largest first by the larger value.
func unionKeys(a, b map[string]float64) []string {
	var ks []string
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(x, y string) int {
		if c := cmp.Compare(max(b[y], a[y]), max(b[x], a[x])); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	return ks
}
