package main

// -agree: whether complete perf-compare runs agree, read from their logs on
// the host. A row's Go/C moves between runs with whatever the measurement
// does not control: under -icount little, in real time the host's load. A
// ratio means something only where two complete runs agree on it (within
// 5% a row): this says whether they did.

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// logRow names a row within a perf-compare log: the pass it ran in (the
// text of the last "== " line before it, "" before any), its mode and its
// size. make perf-compare runs several passes in one boot, and a mode and
// size recur in each.
type logRow struct {
	pass string
	mode string
	size int
}

func (k logRow) String() string {
	if k.pass == "" {
		return fmt.Sprintf("%s %d B", k.mode, k.size)
	}
	return fmt.Sprintf("%s %d B (%s)", k.mode, k.size, k.pass)
}

// logRatios is one log's Go/C a row, each the ratio of the two medians
// (more digits than the line's rounded ratio), with the rows in the
// order the log gave them.
type logRatios struct {
	keys   []logRow
	ratios map[logRow]float64
}

// readRatios reads the `perf <mode> <size> <c median> <go median> <go/c>`
// lines of a perf-compare log and the "== " lines that name their passes;
// it ignores every other line. A row given twice in one pass, a median
// that is not a positive finite number (NaN and Inf included), or a log
// without rows is an error naming the line.
func readRatios(r io.Reader) (logRatios, error) {
	l := logRatios{ratios: map[logRow]float64{}}
	pass := ""
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "== "); ok {
			pass = strings.TrimSpace(p)
			continue
		}
		if !strings.HasPrefix(line, "perf ") {
			continue
		}
		k := logRow{pass: pass}
		var c, g, rounded float64 // the line's own ratio is read only to check the line's shape
		if _, err := fmt.Sscan(strings.TrimPrefix(line, "perf "), &k.mode, &k.size, &c, &g, &rounded); err != nil {
			return l, fmt.Errorf("line %d: %q: want perf <mode> <size> <c median> <go median> <go/c>: %v", n, line, err)
		}
		// Sscan reads NaN and Inf, which the comparisons of the ratios
		// would let through (a NaN is never apart).
		if !finitePositive(c) || !finitePositive(g) || !finitePositive(g/c) {
			return l, fmt.Errorf("line %d: %q: a median that is not a positive number", n, line)
		}
		if _, dup := l.ratios[k]; dup {
			return l, fmt.Errorf("line %d: %s a second time", n, k)
		}
		l.keys = append(l.keys, k)
		l.ratios[k] = g / c
	}
	if err := sc.Err(); err != nil {
		return l, err
	}
	if len(l.keys) == 0 {
		return l, fmt.Errorf("no perf lines: not the output of goverbs-perfcompare")
	}
	return l, nil
}

// finitePositive reports whether x is a number above 0 and below infinity.
func finitePositive(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// apart is how far the largest of xs is above the smallest, as a fraction
// of the smallest: 0.05 is 5%.
func apart(xs []float64) float64 {
	lo, hi := xs[0], xs[0]
	for _, x := range xs[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return hi/lo - 1
}

// printAgreement prints, for each row of the first log, every log's Go/C
// and how far apart they are, then the largest apart. It returns an error
// naming each row that is apart by more than bound (a fraction) and each
// row that some log lacks.
func printAgreement(w io.Writer, names []string, logs []logRatios, bound float64) error {
	var bad []string
	worst := 0.0
	fmt.Fprintf(w, "Go/C of each run (the ratio of its medians), and how far apart the runs are\n")
	pass := ""
	for _, k := range logs[0].keys {
		if k.pass != pass {
			fmt.Fprintf(w, "== %s\n", k.pass)
			pass = k.pass
		}
		rs := make([]float64, 0, len(logs))
		for i, l := range logs {
			r, ok := l.ratios[k]
			if !ok {
				bad = append(bad, fmt.Sprintf("%s: not in %s", k, names[i]))
				continue
			}
			rs = append(rs, r)
		}
		if len(rs) < len(logs) {
			continue
		}
		a := apart(rs)
		worst = max(worst, a)
		var b strings.Builder
		for _, r := range rs {
			fmt.Fprintf(&b, " %6.3f", r)
		}
		fmt.Fprintf(w, "  %-9s %6d%s  %5.1f%%\n", k.mode, k.size, b.String(), 100*a)
		if a > bound {
			bad = append(bad, fmt.Sprintf("%s: %.1f%% apart", k, 100*a))
		}
	}
	for i, l := range logs[1:] {
		for _, k := range l.keys {
			if _, ok := logs[0].ratios[k]; !ok {
				bad = append(bad, fmt.Sprintf("%s: only in %s", k, names[i+1]))
			}
		}
	}
	fmt.Fprintf(w, "largest apart: %.1f%% (bound %.1f%%)\n", 100*worst, 100*bound)
	if len(bad) > 0 {
		return fmt.Errorf("the runs do not agree:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

// agree reads the logs named by files and prints their agreement (-agree).
func agree(w io.Writer, files []string, bound float64) error {
	if len(files) < 2 {
		return fmt.Errorf("-agree needs two logs or more, got %d", len(files))
	}
	logs := make([]logRatios, len(files))
	for i, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		logs[i], err = readRatios(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return printAgreement(w, files, logs, bound)
}
