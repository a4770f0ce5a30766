package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/goverbs/goverbs/internal/cmd/goverbs-perfcompare/insns"
)

// The rows of -insns, as runs.txt names them (its MODE), and its columns:
// the Go rsocket against rstream blocking in its calls, whose waits are
// the like of the Go rsocket's parked calls.
const (
	insnsRoundTrip = "round-trip" // 64 B ping-pong, -S 64 -C 1 -I N: N round trips
	insnsTransfer  = "transfer"   // 64 KiB each way, -S 65536 -C N -I 1: 2N transfers, rstream's xfers
	insnsGo        = "go"
	insnsC         = "c-block"
)

// runInsns runs the go and c-block columns, each at a row's count and at
// four times it, every client between two of insncount's markers (pair's),
// so that the difference of the two runs over three times the count is a
// round trip's or a transfer's instructions, what a run costs once
// (starting, connecting, exiting) left out. It writes an insns.Recorder's
// files to o.insns for -insns-report; a run's Iters are its round trips,
// or its transfers counted one way each (rstream's xfers), and its Rate
// those a second by the client's usec/xfer.
func runInsns(o options) error {
	o.cols = nil
	for _, k := range []string{insnsGo, insnsC} {
		o.cols = append(o.cols, columns[slices.IndexFunc(columns, func(c column) bool { return c.key == k })])
	}
	rec, err := insns.NewRecorder(o.insns)
	if err != nil {
		return err
	}
	defer rec.Close()
	port, err := warmUp(o)
	if err != nil {
		return err
	}
	for _, r := range []struct {
		mode        string
		size, count int
	}{{insnsRoundTrip, 64, o.latIters}, {insnsTransfer, 64 << 10, o.bw64kXfers}} {
		for _, c := range o.cols {
			for _, n := range []int{r.count, 4 * r.count} {
				port++
				rw := row{lat: r.mode == insnsRoundTrip, size: r.size, count: n}
				usec, line, err := pair(o, c, rw.args(), r.size, port, rec.MapsPath())
				if err != nil {
					return fmt.Errorf("-insns, %s %d B, %s (%s), %d: %w", r.mode, r.size, c.key, c.title, n, err)
				}
				units, perUnit := 2*n, usec // transfers one way each
				if rw.lat {
					units, perUnit = n, 2*usec // round trips
				}
				if err := rec.Record(insns.Run{Tool: c.key, Mode: r.mode, Size: r.size, Iters: units, Rate: 1e6 / perUnit}); err != nil {
					return err
				}
				fmt.Printf("ran %-7s %-10s %6d B, %6d: %s\n", c.key, r.mode, r.size, units, line)
			}
		}
	}
	return rec.Close()
}

// printInsns prints, per row, the instructions per round trip or per
// transfer of the Go rsocket and of rstream -T b, both ends and the
// kernel, by region (the kernel, each library, rstream's binary, and
// goverbs-rsockstream's split into the Go runtime and the rest: goverbs,
// the standard library, cgo's glue) and the functions (those whose region
// and name hold filter) where the two differ most (insns.Compare).
func printInsns(w io.Writer, dir string, top int, filter string) error {
	rows, err := insns.Measure(dir, insnsBinary)
	if err != nil {
		return err
	}
	for _, r := range rows {
		unit := "64 KiB transfer (one way; rstream's xfer)"
		if r.Mode == insnsRoundTrip {
			unit = fmt.Sprintf("%d B round trip", r.Size)
		}
		c, g := r.Tools[insnsC], r.Tools[insnsGo]
		if c.Regions == nil || g.Regions == nil {
			return fmt.Errorf("%s %d B: want runs of %s and %s", r.Mode, r.Size, insnsC, insnsGo)
		}
		fmt.Fprintf(w, "\nguest instructions per %s, both ends and the kernel, C (rstream -T b) and Go (goverbs-rsockstream)\n", unit)
		// Both tools' usec/xfer are over their timed loop in either row,
		// so the time a unit is printed for both.
		insns.Compare(w, c, g, true, top, filter)
	}
	return nil
}

// insnsBinary names the region of a tool's own binary: rstream's, or
// goverbs-rsockstream's Go runtime (runtime and internal/ packages,
// where the scheduler, parking and the cgo crossing are) and the rest.
func insnsBinary(tool, fn string) string {
	switch {
	case tool != insnsGo:
		return "rstream"
	case strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "internal/"):
		return "rsockstream: Go runtime"
	}
	return "rsockstream: the rest"
}
