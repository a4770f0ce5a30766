package main

import (
	"bufio"
	"cmp"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/goverbs/goverbs/internal/cmd/goverbs-perfcompare/insns"
)

// runInsns runs each tool of each row twice, at the row's iterations and at
// four times them, each run between two of insncount's markers (pair's), so
// that the difference of the two over 3 x iterations is the instructions of
// a message, what a run costs once (starting, connecting, exiting) left
// out: the more iterations, the less that once-only work's noise matters. It writes to
// o.insns, for -insns-report: runs.txt (one line "INTERVAL TOOL MODE SIZE
// ITERS" a run, INTERVAL being the plugin's snapshot pair that encloses
// it), run-INTERVAL.maps (both processes' executable mappings) and
// kallsyms.
func runInsns(o options) error {
	if err := os.MkdirAll(o.insns, 0o755); err != nil {
		return err
	}
	// Wait for the kernel's random pool here, once: a process that asks
	// for random bytes before it is ready (goverbs-perf's runtime does)
	// has the kernel spin up entropy in its own run's interval.
	if _, err := rand.Read(make([]byte, 1)); err != nil {
		return err
	}
	ks, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.insns, "kallsyms"), ks, 0o644); err != nil {
		return err
	}
	runs, err := os.Create(filepath.Join(o.insns, "runs.txt"))
	if err != nil {
		return err
	}
	defer runs.Close()
	port, interval := o.port, 0
	for _, mode := range o.modes {
		for _, size := range o.sizes {
			iters := o.iters(mode, size)
			for _, tool := range []string{"c", "go"} {
				for _, n := range []int{iters, 4 * iters} {
					args := o.toolArgs(tool, mode, size, n)
					name := "ib_" + mode
					if tool == "go" {
						name = o.perf
					}
					maps := filepath.Join(o.insns, fmt.Sprintf("run-%d.maps", interval))
					r, err := pair(mode, name, o.addr, args, sideArgs{}, port, maps)
					if err != nil {
						return fmt.Errorf("%s %s %d: %w", name, mode, size, err)
					}
					fmt.Fprintf(runs, "%d %s %s %d %d %.1f\n", interval, tool, mode, size, n, r.msgRate)
					fmt.Printf("ran %-3s %-8s %6d B, %6d messages: %.0f msg/s\n", tool, mode, size, n, r.msgRate)
					// The snapshot pair after this one encloses the
					// time between runs.
					interval += 2
					port++
				}
			}
		}
	}
	return runs.Close()
}

// watchMaps reads the executable mappings of pids every 500 ms until stop,
// then writes the last complete reading of each to path: their libraries
// are loaded by then, and the mappings are gone once they exit.
func watchMaps(path string, pids ...int) (stop func()) {
	last := make([][]byte, len(pids))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			for i, pid := range pids {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid)); err == nil && len(b) > 0 {
					last[i] = b
				}
			}
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		os.WriteFile(path, slices.Concat(last...), 0o644)
	}
}

// insnRun is a line of runs.txt.
type insnRun struct {
	interval int
	tool     string
	mode     string
	size     int
	iters    int
	rate     float64 // the client's messages a second; 0 in files written before it was kept
}

func readRuns(path string) ([]insnRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var runs []insnRun
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		var r insnRun
		// Five fields as first written, six since the rate is kept.
		dst := []any{&r.interval, &r.tool, &r.mode, &r.size, &r.iters, &r.rate}
		var err error
		if n := len(strings.Fields(sc.Text())); n < 5 || n > len(dst) {
			err = fmt.Errorf("%d fields, want 5 or 6", n)
		} else {
			_, err = fmt.Sscan(sc.Text(), dst[:n]...)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %q: %v", path, line, sc.Text(), err)
		}
		runs = append(runs, r)
	}
	return runs, sc.Err()
}

// nsPerMessage is the time a message of the two runs' difference, from
// the clients' rates (messages over the timed loop); 0 if a rate is not
// known.
func nsPerMessage(short, long insnRun) float64 {
	if short.rate <= 0 || long.rate <= 0 {
		return 0
	}
	return (float64(long.iters)/long.rate - float64(short.iters)/short.rate) / float64(long.iters-short.iters) * 1e9
}

// printInsns prints, per row, the instructions per message of each tool
// by region (the kernel, the tool's binary, each library) and the top
// functions (those whose name holds filter) where Go's and C's differ most.
// Where runs.txt kept the client's rates, it also prints, for bandwidth
// rows, each tool's time a message, by the same difference of the two
// runs, and that time less the instructions. Under -icount shift=0 an
// instruction advances guest time by 1 ns, so the two should agree; where
// they part, guest time passed that the plugin did not count, such as a
// halted vCPU.
func printInsns(w io.Writer, dir string, top int, filter string) error {
	runs, err := readRuns(filepath.Join(dir, "runs.txt"))
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, "snaps.txt"))
	if err != nil {
		return err
	}
	intervals, err := insns.Intervals(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("snaps.txt: %w", err)
	}
	f, err = os.Open(filepath.Join(dir, "kallsyms"))
	if err != nil {
		return err
	}
	kernel, err := insns.ReadKallsyms(f)
	f.Close()
	if err != nil {
		return err
	}

	// per[row][tool] is the instructions per message by "region" and by
	// "region function".
	type perTool struct {
		regions, funcs map[string]float64
		ns             float64 // time a message by the client's rates; 0 if not kept
	}
	type rowKey struct {
		mode string
		size int
	}
	per := map[rowKey]map[string]perTool{}
	var order []rowKey
	byRun := map[rowKey]map[string][]insnRun{}
	for _, r := range runs {
		k := rowKey{r.mode, r.size}
		if byRun[k] == nil {
			byRun[k] = map[string][]insnRun{}
			order = append(order, k)
		}
		byRun[k][r.tool] = append(byRun[k][r.tool], r)
	}
	for _, k := range order {
		per[k] = map[string]perTool{}
		for tool, rs := range byRun[k] {
			if len(rs) != 2 || rs[0].iters >= rs[1].iters {
				return fmt.Errorf("%s %d %s: want two runs of growing iterations, have %d", k.mode, k.size, tool, len(rs))
			}
			var regions, funcs [2]map[string]uint64
			for i, r := range rs {
				if r.interval >= len(intervals) {
					return fmt.Errorf("run %d: snaps.txt has only %d intervals", r.interval, len(intervals))
				}
				mf, err := os.Open(filepath.Join(dir, fmt.Sprintf("run-%d.maps", r.interval)))
				if err != nil {
					return err
				}
				maps, err := insns.ReadMaps(mf)
				mf.Close()
				if err != nil {
					return fmt.Errorf("run-%d.maps: %w", r.interval, err)
				}
				s := &insns.Symbolizer{Kernel: kernel, Maps: maps}
				c := intervals[r.interval]
				regions[i] = c.By(func(a uint64) string { return toolRegion(s, a, tool) })
				funcs[i] = c.By(func(a uint64) string {
					_, fn := s.Where(a)
					return toolRegion(s, a, tool) + " " + cmp.Or(fn, "?")
				})
			}
			per[k][tool] = perTool{
				regions: insns.PerMessage(regions[0], regions[1], rs[0].iters, rs[1].iters),
				funcs:   insns.PerMessage(funcs[0], funcs[1], rs[0].iters, rs[1].iters),
				ns:      nsPerMessage(rs[0], rs[1]),
			}
		}
	}

	for _, k := range order {
		c, g := per[k]["c"], per[k]["go"]
		fmt.Fprintf(w, "\n%s %d B: guest instructions per message, both sides and the kernel, C (perftest) and Go (goverbs-perf)\n", k.mode, k.size)
		fmt.Fprintf(w, "  %-28s %10s %10s %10s\n", "region", "C", "Go", "Go-C")
		sum := func(m map[string]float64) (t float64) {
			for _, v := range m {
				t += v
			}
			return t
		}
		fmt.Fprintf(w, "  %-28s %10.0f %10.0f %+10.0f\n", "all", sum(c.regions), sum(g.regions), sum(g.regions)-sum(c.regions))
		if c.ns > 0 && g.ns > 0 && !latMode(k.mode) {
			// A latency row's rate is not its messages over its loop.
			fmt.Fprintf(w, "  %-28s %10.0f %10.0f %+10.0f\n", "ns (the client's rates)", c.ns, g.ns, g.ns-c.ns)
			fmt.Fprintf(w, "  %-28s %10.0f %10.0f %+10.0f\n", "ns - all", c.ns-sum(c.regions), g.ns-sum(g.regions), (g.ns-sum(g.regions))-(c.ns-sum(c.regions)))
		}
		for _, r := range unionKeys(c.regions, g.regions) {
			fmt.Fprintf(w, "  %-28s %10.0f %10.0f %+10.0f\n", r, c.regions[r], g.regions[r], g.regions[r]-c.regions[r])
		}
		fmt.Fprintf(w, "  functions where Go and C differ most (the tool's own are its binary's):\n")
		fns := slices.DeleteFunc(unionKeys(c.funcs, g.funcs), func(fn string) bool { return !strings.Contains(fn, filter) })
		slices.SortStableFunc(fns, func(a, b string) int {
			da, db := g.funcs[a]-c.funcs[a], g.funcs[b]-c.funcs[b]
			return cmp.Compare(max(db, -db), max(da, -da))
		})
		for _, fn := range fns[:min(len(fns), top)] {
			fmt.Fprintf(w, "  %-60s %8.0f %8.0f %+8.0f\n", fn, c.funcs[fn], g.funcs[fn], g.funcs[fn]-c.funcs[fn])
		}
	}
	return nil
}

// toolRegion is a's region, the tool's own binary named as the tool.
func toolRegion(s *insns.Symbolizer, a uint64, tool string) string {
	region, _ := s.Where(a)
	if region == "kernel" || region == "[vdso]" || region == "unmapped" || strings.Contains(region, ".so") {
		return region
	}
	return toolName(tool)
}

func toolName(tool string) string {
	if tool == "go" {
		return "tool binary (goverbs-perf)"
	}
	return "tool binary (perftest)"
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
