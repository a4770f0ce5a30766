// Package loopallocs is the line goverbs-perf reports its timed loop's heap
// allocations with, written by the tool and read by what checks it
// (goverbs-perfcompare, tests/rxe):
//
//	heap allocations in the timed loop: N (and K by the Go runtime alone)
//	  allocated at FUNCTION FILE:LINE xCOUNT
//
// one "allocated at" line for each site of the N. It is pure Go, so that a
// checker need not build the tool's cgo.
package loopallocs

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

const (
	prefix     = " heap allocations in the timed loop: "
	sitePrefix = "   allocated at "
)

// Report is what the line says.
type Report struct {
	Own     int64    // allocations by the loop (any frame outside package runtime)
	Runtime int64    // the runtime's own (thread starts and the like)
	Sites   []string // where Own were made: "function file:line xN"
}

// Write writes r's lines to w.
func Write(w io.Writer, r Report) {
	fmt.Fprintf(w, "%s%d (and %d by the Go runtime alone)\n", prefix, r.Own, r.Runtime)
	for _, s := range r.Sites {
		fmt.Fprintf(w, "%s%s\n", sitePrefix, s)
	}
}

// Parse finds the report in a run's output; ok is false when there is none.
func Parse(out string) (r Report, ok bool, err error) {
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		rest, found := strings.CutPrefix(line, prefix)
		if !found {
			continue
		}
		own, rest, _ := strings.Cut(rest, " (and ")
		rt, _, _ := strings.Cut(rest, " ")
		if r.Own, err = strconv.ParseInt(own, 10, 64); err != nil {
			return Report{}, true, fmt.Errorf("%q: %w", line, err)
		}
		if r.Runtime, err = strconv.ParseInt(rt, 10, 64); err != nil {
			return Report{}, true, fmt.Errorf("%q: %w", line, err)
		}
		for _, l := range lines[i+1:] {
			site, isSite := strings.CutPrefix(l, sitePrefix)
			if !isSite {
				break
			}
			r.Sites = append(r.Sites, site)
		}
		return r, true, nil
	}
	return Report{}, false, nil
}
