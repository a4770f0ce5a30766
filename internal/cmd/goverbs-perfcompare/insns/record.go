package insns

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Run is one measured run of a tool, a line of a -insns directory's
// runs.txt.
type Run struct {
	Interval int     // the snapshot pair (k, k+1) of snaps.txt that encloses the run
	Tool     string  // which tool ran: the key a report compares by
	Mode     string  // what the run measured (a row): with Size, the key a report groups by
	Size     int     // bytes a message
	Iters    int     // messages: the unit the report's figures are per
	Rate     float64 // the client's messages a second; 0 if not known (and in files written before it was kept)
}

// Recorder writes the host's side of a -insns run to a directory: runs.txt
// (one Run a line, "INTERVAL TOOL MODE SIZE ITERS RATE"), run-INTERVAL.maps
// (the executable mappings of each run's processes, WatchMaps') and
// kallsyms. Its contract with the runs: each run is enclosed by exactly two
// Markers (the first after the server is ready, the second after both ends
// have exited), and between runs no other Marker runs, so that the runs'
// intervals are 0, 2, 4, ... (the odd ones are the time between runs).
type Recorder struct {
	dir      string
	runs     *os.File
	interval int
}

// NewRecorder creates dir and writes kallsyms there. It first waits for
// the kernel's random pool, once: a process that asks for random bytes
// before it is ready (a Go runtime does) has the kernel spin up entropy in
// its own run's interval.
func NewRecorder(dir string) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := rand.Read(make([]byte, 1)); err != nil {
		return nil, err
	}
	ks, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kallsyms"), ks, 0o644); err != nil {
		return nil, err
	}
	runs, err := os.Create(filepath.Join(dir, "runs.txt"))
	if err != nil {
		return nil, err
	}
	return &Recorder{dir: dir, runs: runs}, nil
}

// MapsPath is where the next run's mappings go (WatchMaps' path).
func (r *Recorder) MapsPath() string {
	return filepath.Join(r.dir, fmt.Sprintf("run-%d.maps", r.interval))
}

// Record writes the run just ended (its Interval is the Recorder's to set)
// and moves on to the next run's interval.
func (r *Recorder) Record(run Run) error {
	run.Interval = r.interval
	r.interval += 2
	_, err := fmt.Fprintf(r.runs, "%d %s %s %d %d %.1f\n", run.Interval, run.Tool, run.Mode, run.Size, run.Iters, run.Rate)
	return err
}

// Close closes runs.txt.
func (r *Recorder) Close() error { return r.runs.Close() }

// ReadRuns reads a runs.txt: five fields a line as first written, six
// since the rate is kept. An error names the file and line.
func ReadRuns(path string) ([]Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var runs []Run
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		var r Run
		dst := []any{&r.Interval, &r.Tool, &r.Mode, &r.Size, &r.Iters, &r.Rate}
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

// WatchMaps reads the executable mappings of pids, the ends of a run of
// one tool (a server, then its client), every 50 ms until every process
// maps the same files and none changed them since the last reading, or
// until stop; it then writes the last complete reading of each to path:
// the mappings are gone once the processes exit. The server, which
// already listens, has loaded what the tool loads to start, so the client
// has caught up when it maps the same; unchanged alone is not enough, as
// under -icount sleep=off 500 ms of guest time can pass while the dynamic
// loader waits for the disk. Each reading costs the kernel about as many
// instructions as a few round trips, counted in the run's interval: a
// run's once-only work (connecting, tearing down) can last seconds of
// guest time, so reading for as long as the run lasts would count numbers
// of readings that differ between runs, and reading every 500 ms missed
// the libraries of a client that ran for less. A library loaded after the
// client caught up is missed, and its instructions show as the region
// "unmapped".
func WatchMaps(path string, pids ...int) (stop func()) {
	last := make([][]byte, len(pids))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			same := true
			for i, pid := range pids {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
				if err != nil || len(b) == 0 {
					same = false
					continue
				}
				same = same && last[i] != nil && executable(b) == executable(last[i]) && mappedFiles(b) == mappedFiles(last[0])
				last[i] = b
			}
			if same {
				return
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		os.WriteFile(path, slices.Concat(last...), 0o644)
	}
}

// executable is the lines of a maps file whose permissions allow
// executing, joined.
func executable(maps []byte) string {
	var b strings.Builder
	for line := range strings.Lines(string(maps)) {
		if f := strings.Fields(line); len(f) > 1 && strings.Contains(f[1], "x") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// mappedFiles is the paths of a maps file's executable mappings, sorted,
// one a line: what two processes of one tool have in common once both
// have loaded the same, at addresses of their own.
func mappedFiles(maps []byte) string {
	var paths []string
	for line := range strings.Lines(executable(maps)) {
		if f := strings.Fields(line); len(f) >= 6 {
			paths = append(paths, f[5])
		}
	}
	slices.Sort(paths)
	return strings.Join(slices.Compact(paths), "\n")
}
