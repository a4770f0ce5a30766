package gen

import (
	"fmt"
	"sort"
	"strings"
	"syscall"
)

// Retype is a named patch (PackageSpec.Retypes) that gives an integer the Go
// type of a named enum. Its key names the integer by C names:
//
//   - "FUNCTION.PARAMETER": a parameter ("ibv_reg_mr.access"), or a pointer
//     parameter to an integer (*QPAttrMask for int *qp_attr_mask);
//   - "FUNCTION.return": a function's result;
//   - "RECORD.MEMBER": a member of a struct or union, by its tag or typedef
//     name ("ibv_send_wr.send_flags"), found through anonymous members as
//     C finds it; "RECORD.MEMBER.MEMBER" reaches into a struct defined
//     inside the record ("ibv_odp_caps.per_transport_caps.rc_odp_caps").
//
// An entry that matches nothing, or whose enum these headers lack (an
// older release may declare the integer before the enum), is a stale patch
// (IR.StalePatches) and the integer keeps its C type. The enum's Go type
// must have the C integer's size, or generation fails naming the entry: the Go value is the C value's bits, whose sign the
// enum's type decides (an int attr_mask is a uint32 QPAttrMask). The enum
// may belong to a package earlier in the table than the entry's, which the
// generated package imports (rdmacm's flags may be verbs.SendFlags).
type Retype struct {
	Enum string // the C enum's tag: "ibv_access_flags"
	// Reason says why the integer carries that enum's values, from the
	// man page or the header ("IBV_ACCESS_* flags (ibv_reg_mr(3))"): the
	// table is the documentation of each choice.
	Reason string
}

// NoRDMA is a named patch (PackageSpec.NoRDMA) saying that a function's
// failure with Errno means that this host has no RDMA to offer, rather
// than what the errno's name says: the kernel has no RDMA support, or
// (where the library cannot tell the two apart) no RDMA device. The stub's
// error then matches verberr.ErrNoRDMA besides the errno, and says Says
// and what to do about it (verberr.Site.NoRDMA). An ENOSYS that the
// generated loader gives because the installed library lacks the function
// is never that failure: it names the missing function, as before.
type NoRDMA struct {
	Errno syscall.Errno // what the function fails with: syscall.ENOSYS
	// Says is what the failure means, for its message: "this kernel has
	// no RDMA support: no /sys/class/infiniband_verbs".
	Says string
	// Reason is where the library decides it, for whoever checks the
	// entry against a newer rdma-core.
	Reason string
}

// errnoNames spells the errnos a NoRDMA entry may name in the generated
// code (syscall.ENOSYS): an entry with another errno fails generation
// until it is added here.
var errnoNames = map[syscall.Errno]string{
	syscall.ENOSYS: "ENOSYS", syscall.ENODEV: "ENODEV", syscall.ENXIO: "ENXIO", syscall.ENOENT: "ENOENT",
	syscall.EPERM: "EPERM", syscall.EACCES: "EACCES", syscall.EOPNOTSUPP: "EOPNOTSUPP",
	syscall.EPROTONOSUPPORT: "EPROTONOSUPPORT", syscall.EAFNOSUPPORT: "EAFNOSUPPORT",
}

// retypeSlot is one integer a Retype entry matched: where its type is
// kept (replaced by a copy carrying GoEnum), what it is for messages, and
// whether a pointer to an integer is allowed there (a parameter's).
type retypeSlot struct {
	typ      **Type
	what     string
	pos      Pos
	pointers bool
}

// applyPatches applies the type patches of specs to ir, after naming:
// each Retypes entry gives the integers it names GoEnum, each NoRDMA entry
// sets its function's NoRDMA. It returns the entries that matched nothing
// (for IR.StalePatches), or the first entry, in key order, that cannot
// apply, naming it and where its target is declared.
func applyPatches(ir *IR, specs []PackageSpec) (stale []string, err error) {
	enums := map[string]*Enum{}
	for _, en := range ir.Enums {
		if en.CName != "" {
			enums[en.CName] = en
		}
	}
	order := map[string]int{}
	for i, s := range specs {
		order[s.Name] = i
	}
	funcs := append(append([]*Func(nil), ir.Funcs...), ir.Shadowed...)
	for i := range specs {
		spec := &specs[i]
		keys := make([]string, 0, len(spec.Retypes))
		for k := range spec.Retypes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, key := range keys {
			rt := spec.Retypes[key]
			slots, err := retypeSlots(ir, spec, funcs, key)
			if err != nil {
				return nil, err
			}
			en := enums[rt.Enum]
			switch {
			case en == nil:
				// An older release may declare the integer but not the
				// enum (ibv_query_qp_data_in_order's flags before 45.0):
				// the integer keeps its C type there. A misspelt enum
				// reads the same, which the check of the table against
				// the vendored headers catches (no entry may be stale).
				stale = append(stale, fmt.Sprintf("%s: retype %s (no enum %s in these headers)", spec.Name, key, rt.Enum))
				continue
			case len(slots) == 0:
				stale = append(stale, spec.Name+": retype "+key)
				continue
			}
			for _, sl := range slots {
				if err := retype(sl, en, rt, key, spec, order); err != nil {
					return nil, err
				}
			}
		}
		names := make([]string, 0, len(spec.NoRDMA))
		for n := range spec.NoRDMA {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			nr := spec.NoRDMA[n]
			if _, ok := errnoNames[nr.Errno]; !ok {
				return nil, fmt.Errorf("NoRDMA entry %q of package %s: errno %d has no name here: add it to gen's errnoNames", n, spec.Name, int(nr.Errno))
			}
			if nr.Says == "" {
				return nil, fmt.Errorf("NoRDMA entry %q of package %s: Says is empty: the error must say what the failure means", n, spec.Name)
			}
			matched := false
			for _, fn := range ir.Funcs {
				if fn.Name == n && fn.Package == spec.Name {
					fn.NoRDMA, matched = &nr, true
				}
			}
			if !matched {
				stale = append(stale, spec.Name+": no-RDMA "+n)
			}
		}
	}
	return stale, nil
}

// retypeSlots finds what Retypes entry key of spec names: parameters or
// results of spec's functions, or members of spec's records.
func retypeSlots(ir *IR, spec *PackageSpec, funcs []*Func, key string) ([]retypeSlot, error) {
	head, rest, ok := strings.Cut(key, ".")
	if !ok || head == "" || rest == "" {
		return nil, fmt.Errorf("retype %q of package %s: the key is not FUNCTION.PARAMETER, FUNCTION.return or RECORD.MEMBER", key, spec.Name)
	}
	var slots []retypeSlot
	for _, fn := range funcs {
		if fn.Name != head || !spec.owns(fn.Pos.File) {
			continue
		}
		if rest == "return" {
			slots = append(slots, retypeSlot{&fn.Result, "the result of " + fn.Name, fn.Pos, true})
			continue
		}
		for _, p := range fn.Params {
			if p.Name == rest {
				slots = append(slots, retypeSlot{&p.Type, "parameter " + p.Name + " of " + fn.Name, fn.Pos, true})
			}
		}
	}
	isFunc := len(slots) > 0
	for _, r := range ir.Records {
		if r.Parent != nil || r.CName != head || r.Incomplete || r.System || !spec.owns(r.Pos.File) {
			continue
		}
		m, err := memberAt(r, strings.Split(rest, "."), key, spec)
		if err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		if isFunc {
			return nil, fmt.Errorf("%s: retype %q of package %s: %s is both a function and a record: the key is ambiguous", r.Pos, key, spec.Name, head)
		}
		slots = append(slots, retypeSlot{&m.Type, "member " + rest + " of " + r.Describe(), m.Pos, false})
	}
	return slots, nil
}

// memberAt finds the member of r at path, through anonymous members and
// into records defined inside r; nil if there is none.
func memberAt(r *Record, path []string, key string, spec *PackageSpec) (*Member, error) {
	m := directMember(r, path[0])
	if m == nil || len(path) == 1 {
		return m, nil
	}
	t := m.Type
	if t.Kind != KRecord {
		return nil, nil
	}
	if t.Record.Parent == nil {
		return nil, fmt.Errorf("%s: retype %q of package %s: member %s is %s, declared on its own: retype %s.%s instead",
			m.Pos, key, spec.Name, m.Name, t.Record.Describe(), t.Record.CName, strings.Join(path[1:], "."))
	}
	return memberAt(t.Record, path[1:], key, spec)
}

// directMember is r's member name, looked for through its anonymous
// members as C finds it.
func directMember(r *Record, name string) *Member {
	for _, m := range r.Members {
		if m.Name == name {
			return m
		}
		if m.Name == "" && m.Type.Kind == KRecord {
			if sub := directMember(m.Type.Record, name); sub != nil {
				return sub
			}
		}
	}
	return nil
}

// retype gives the integer of sl the Go type of en, or says why it cannot.
func retype(sl retypeSlot, en *Enum, rt Retype, key string, spec *PackageSpec, order map[string]int) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: retype %q of package %s: %s", sl.pos, key, spec.Name, fmt.Sprintf(format, args...))
	}
	if o, ok := order[en.Package]; !ok || o > order[spec.Name] {
		return fail("enum %s is package %s's, which package %s does not import (only those before it in the table)", rt.Enum, en.Package, spec.Name)
	}
	t := *sl.typ
	slot := sl.typ
	if sl.pointers && t.Kind == KPointer && t.Elem != nil {
		// A pointer to the integer: *QPAttrMask for int *qp_attr_mask.
		p := *t
		slot, t = &p.Elem, t.Elem
		*sl.typ = &p
	}
	if t.Kind != KInt && t.Kind != KEnum || t.Bool {
		return fail("%s is %s, not an integer", sl.what, describeType(t))
	}
	if t.Size != en.Size {
		return fail("%s is %s, %d bytes, and enum %s is %d: the Go type must have the C type's size", sl.what, describeType(t), t.Size, rt.Enum, en.Size)
	}
	c := *t
	c.GoEnum = en
	*slot = &c
	return nil
}

// describeType spells t for messages: "int", "uint64_t", "struct ibv_wc *".
func describeType(t *Type) string { return cDecl(t, "") }
