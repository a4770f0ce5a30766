package gen

import (
	"fmt"
	"sort"
)

// Change is one difference between two header sets.
type Change struct {
	Kind string // "struct", "enum", "function", "macro"
	Name string // C name
	What string // what changed, in words
}

func (c Change) String() string { return fmt.Sprintf("%s %s: %s", c.Kind, c.Name, c.What) }

// Diff compares two IRs of the same headers at different rdma-core versions:
// records added, removed, resized or with members moved; enumerators, macros
// and functions added or removed. The result is sorted.
func Diff(old, cur *IR) []Change {
	var out []Change
	recs := func(ir *IR) map[string]*Record {
		m := map[string]*Record{}
		for _, r := range ir.Records {
			if !r.Incomplete {
				m[r.CType()] = r
			}
		}
		return m
	}
	or, cr := recs(old), recs(cur)
	for name, c := range cr {
		o, ok := or[name]
		if !ok {
			out = append(out, Change{"struct", name, fmt.Sprintf("added (size %d)", c.Size)})
			continue
		}
		if o.Size != c.Size || o.Align != c.Align {
			out = append(out, Change{"struct", name, fmt.Sprintf("size %d -> %d, align %d -> %d", o.Size, c.Size, o.Align, c.Align)})
		}
		if o.System || c.System {
			continue
		}
		offs := func(r *Record) map[string]int64 {
			m := map[string]int64{}
			for _, it := range layoutOf(r) {
				if it.kind != itemStorage {
					m[it.cPath] = it.off
				}
			}
			return m
		}
		oo, co := offs(o), offs(c)
		for mem, off := range co {
			if was, ok := oo[mem]; !ok {
				out = append(out, Change{"struct", name, fmt.Sprintf("member %s added @%d", mem, off)})
			} else if was != off {
				out = append(out, Change{"struct", name, fmt.Sprintf("member %s moved @%d -> @%d", mem, was, off)})
			}
		}
		for mem := range oo {
			if _, ok := co[mem]; !ok {
				out = append(out, Change{"struct", name, fmt.Sprintf("member %s removed", mem)})
			}
		}
	}
	for name := range or {
		if _, ok := cr[name]; !ok {
			out = append(out, Change{"struct", name, "removed"})
		}
	}
	names := func(ir *IR) (enums, macros, funcs map[string]uint64) {
		enums, macros, funcs = map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
		for _, e := range ir.Enums {
			for _, x := range e.Enumerators {
				enums[x.Name] = x.Value
			}
		}
		for _, m := range ir.Macros {
			macros[m.Name] = m.Value
		}
		for _, f := range ir.Funcs {
			funcs[f.Name] = 0
		}
		return
	}
	oe, om, of := names(old)
	ce, cm, cf := names(cur)
	for _, set := range []struct {
		kind     string
		old, cur map[string]uint64
	}{{"enumerator", oe, ce}, {"macro", om, cm}, {"function", of, cf}} {
		for n, v := range set.cur {
			if was, ok := set.old[n]; !ok {
				out = append(out, Change{set.kind, n, "added"})
			} else if was != v {
				out = append(out, Change{set.kind, n, fmt.Sprintf("value %d -> %d", int64(was), int64(v))})
			}
		}
		for n := range set.old {
			if _, ok := set.cur[n]; !ok {
				out = append(out, Change{set.kind, n, "removed"})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
