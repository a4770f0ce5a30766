package layoutcheck

import (
	"reflect"
	"testing"
)

// Diff names each disagreement once: a value, a row one side lacks, and a
// row one side has twice, whose second value would otherwise hide the
// first's mismatch.
func TestDiff(t *testing.T) {
	c := []Row{{"sizeof(struct a)", 8}, {"offsetof(struct a, x)", 4}, {"enum A", 1}, {"enum A", 2}}
	g := []Row{{"sizeof(struct a)", 16}, {"enum A", 2}, {"macro M", 3}}
	want := []string{
		"enum A: C has the row twice",
		"macro M: Go has 3, C has no such row",
		"offsetof(struct a, x): C has 4, Go has no such row",
		"sizeof(struct a): C says 8, Go says 16",
	}
	if got := Diff(c, g); !reflect.DeepEqual(got, want) {
		t.Errorf("Diff =\n%q\nwant\n%q", got, want)
	}
	if got := Diff(c[:2], c[:2]); len(got) != 0 {
		t.Errorf("Diff of a table with itself = %q, want nothing", got)
	}
	b := []Row{{"enum B", 1}}
	if got := Diff(b, append(b, b...)); !reflect.DeepEqual(got, []string{"enum B: Go has the row twice"}) {
		t.Errorf("Diff with a Go row twice = %q", got)
	}
}
