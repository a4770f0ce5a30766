package main

import (
	"fmt"
	"io"

	"github.com/goverbs/goverbs/internal/cmd/goverbs-perfcompare/insns"
)

// runInsns runs each tool of each row twice, at the row's iterations and at
// four times them, each run between two of insncount's markers (pair's), so
// that the difference of the two over 3 x iterations is the instructions of
// a message, what a run costs once (starting, connecting, exiting) left
// out: the more iterations, the less that once-only work's noise matters.
// It writes to o.insns, for -insns-report, an insns.Recorder's files.
func runInsns(o options) error {
	rec, err := insns.NewRecorder(o.insns)
	if err != nil {
		return err
	}
	defer rec.Close()
	port := o.port
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
					r, err := pair(mode, name, o.addr, args, sideArgs{}, port, rec.MapsPath())
					if err != nil {
						return fmt.Errorf("%s %s %d: %w", name, mode, size, err)
					}
					if err := rec.Record(insns.Run{Tool: tool, Mode: mode, Size: size, Iters: n, Rate: r.msgRate}); err != nil {
						return err
					}
					fmt.Printf("ran %-3s %-8s %6d B, %6d messages: %.0f msg/s\n", tool, mode, size, n, r.msgRate)
					port++
				}
			}
		}
	}
	return rec.Close()
}

// printInsns prints, per row, the instructions per message of each tool
// by region (the kernel, the tool's binary, each library) and the top
// functions (those whose name holds filter) where Go's and C's differ most
// (insns.Compare). Where runs.txt kept the client's rates, it also prints,
// for bandwidth rows, each tool's time a message by the same difference of
// the two runs: a latency row's rate is not its messages over its loop.
func printInsns(w io.Writer, dir string, top int, filter string) error {
	rows, err := insns.Measure(dir, func(tool, _ string) string {
		if tool == "go" {
			return "tool binary (goverbs-perf)"
		}
		return "tool binary (perftest)"
	})
	if err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Fprintf(w, "\n%s %d B: guest instructions per message, both sides and the kernel, C (perftest) and Go (goverbs-perf)\n", r.Mode, r.Size)
		insns.Compare(w, r.Tools["c"], r.Tools["go"], !latMode(r.Mode), top, filter)
	}
	return nil
}
