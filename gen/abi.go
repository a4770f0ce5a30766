package gen

import (
	"fmt"
	"sort"
	"strings"
)

// rdma-core keeps its ABI by growing records at their end: a member, once
// released, keeps its offset and its size forever, and an enumerator keeps
// its value. CheckGrowth tests that promise between two releases' IRs.
//
// One record grows the other way on purpose: struct verbs_context, whose
// first line reads "grows up - new fields go here". The library reaches it
// from the struct ibv_context embedded at its end (container_of, see
// verbs_get_ctx), so its members keep their offset relative to that member,
// not to the start of the record. FrontGrowing lists such records.

// FrontGrowing maps each record that grows at its front (as
// Record.Describe names it) to its anchor: the top-level member every other
// member keeps its offset relative to.
//
// For such a record CheckGrowth compares every member's offset relative to
// the anchor instead of its absolute offset, and requires that the members
// after the anchor stay exactly those of the older release (same names, and,
// like every member, the same offsets relative to the anchor): new members go
// in front of the anchor, never after it. rdma-core's own rule for
// verbs_context ("Must be last field in the struct") is the special case with
// nothing after the anchor; the check does not insist on it, so a record with
// a fixed trailer after its anchor is allowed too, as long as the trailer
// never changes. The front may only grow (the anchor's absolute offset may
// not decrease), and the anchor, like any member of a tagged record type with
// nothing after it, may itself grow at its end.
var FrontGrowing = map[string]string{
	"struct verbs_context": "context",
}

// GrowthViolation is one way a newer release broke the layout or the values
// of an older one.
type GrowthViolation struct {
	Kind   string // "record removed", "record incomplete", "shrunk", "alignment", "member removed", "member moved", "member resized", "anchor", "enumerator removed", "enumerator value"; in GrowthReport.Reused: "reserved shrunk", "reserved replaced"
	Record string // the record as Record.Describe names it ("struct ibv_port_attr"); empty for an enumerator
	Member string // the member's C path ("active_width", "wr.rdma.rkey"), or the enumerator; empty for the record itself
	Anchor string // for a front-growing record: the member offsets are relative to (Old/CurOffset); empty otherwise

	OldVersion, CurVersion string
	OldOffset, CurOffset   int64  // member offsets (relative to Anchor when set)
	OldSize, CurSize       int64  // record or member sizes, or alignments for "alignment"
	OldValue, CurValue     uint64 // enumerator values, two's complement bits
	Detail                 string // extra words for the message, if any
}

func release(v string) string {
	if v == "" {
		return "an unknown rdma-core release"
	}
	return "rdma-core " + v
}

func (v GrowthViolation) String() string {
	o, c := release(v.OldVersion), release(v.CurVersion)
	rel := ""
	if v.Anchor != "" {
		rel = ", relative to member " + v.Anchor
	}
	var s string
	switch v.Kind {
	case "record removed":
		s = fmt.Sprintf("%s: defined in %s (size %d), missing in %s", v.Record, o, v.OldSize, c)
	case "record incomplete":
		s = fmt.Sprintf("%s: defined in %s (size %d), only declared (incomplete) in %s", v.Record, o, v.OldSize, c)
	case "shrunk":
		s = fmt.Sprintf("%s: size shrank from %d (%s) to %d (%s)", v.Record, v.OldSize, o, v.CurSize, c)
	case "alignment":
		s = fmt.Sprintf("%s: alignment changed from %d (%s) to %d (%s)", v.Record, v.OldSize, o, v.CurSize, c)
	case "member removed":
		s = fmt.Sprintf("%s: member %s (at %d%s in %s) is missing in %s", v.Record, v.Member, v.OldOffset, rel, o, c)
	case "member moved":
		s = fmt.Sprintf("%s: member %s moved from %d (%s) to %d (%s)%s", v.Record, v.Member, v.OldOffset, o, v.CurOffset, c, rel)
	case "member resized":
		s = fmt.Sprintf("%s: member %s (at %d%s) changed size from %d (%s) to %d (%s)", v.Record, v.Member, v.CurOffset, rel, v.OldSize, o, v.CurSize, c)
	case "reserved replaced":
		s = fmt.Sprintf("%s: reserved member %s (at %d%s, %d bytes in %s) is gone in %s", v.Record, v.Member, v.OldOffset, rel, v.OldSize, o, c)
	case "reserved shrunk":
		s = fmt.Sprintf("%s: reserved member %s shrank from %d bytes at %d (%s) to %d at %d (%s)%s", v.Record, v.Member, v.OldSize, v.OldOffset, o, v.CurSize, v.CurOffset, c, rel)
	case "anchor":
		s = fmt.Sprintf("%s: grows at its front, anchored at member %s: %s", v.Record, v.Anchor, v.Detail)
		return s
	case "enumerator removed":
		s = fmt.Sprintf("enumerator %s (value %d in %s) is missing in %s", v.Member, int64(v.OldValue), o, c)
	case "enumerator value":
		s = fmt.Sprintf("enumerator %s: value changed from %d (%s) to %d (%s)", v.Member, int64(v.OldValue), o, int64(v.CurValue), c)
	default:
		s = fmt.Sprintf("%s %s: %s (%s -> %s)", v.Record, v.Member, v.Kind, o, c)
	}
	if v.Detail != "" {
		s += ": " + v.Detail
	}
	return s
}

// GrowthReport is the outcome of one CheckGrowth: what was compared and
// every violation, sorted.
type GrowthReport struct {
	OldVersion, CurVersion string
	Records                int // records of the older release compared (nested anonymous ones count with their parent)
	FrontGrowing           int // of which compared relative to an anchor
	Members                int // members of the older release compared, nested ones included
	Enumerators            int // enumerators of the older release compared
	Violations             []GrowthViolation
	// Reused lists the reserved members of the older release (named
	// reserved*, rsvd*, resv*, with any leading underscores; not a flexible
	// array, not of a tagged record type) whose bytes the newer one took
	// over, in part or whole, for new members: the kernel and rdma-core
	// extend fixed-size structures that way. Such a member may vanish, or
	// shrink to a part of the bytes it had. That is not a violation, since
	// reserved bytes carry nothing a caller may rely on, as long as nothing
	// else moved (checked as usual); they are listed so that they are seen.
	// A reserved member that moves beyond its old bytes is a violation.
	Reused []GrowthViolation
}

// String is a one-line summary.
func (r *GrowthReport) String() string {
	return fmt.Sprintf("%s -> %s: %d records (%d front-growing), %d members, %d enumerators checked; %d violations; %d reserved members reused",
		release(r.OldVersion), release(r.CurVersion), r.Records, r.FrontGrowing, r.Members, r.Enumerators, len(r.Violations), len(r.Reused))
}

// CheckGrowth checks that cur, a newer release's IR (from Load and Model),
// keeps the ABI of old, an older one's:
//
//   - every struct and union complete in old is still defined in cur (by tag,
//     or by typedef name for a record known only through one), with no
//     smaller size and the same alignment (a front-growing record: see
//     FrontGrowing);
//   - every member of old, members of anonymous structs and unions and of
//     anonymous records in named members included (by C path, "wr.rdma.rkey"),
//     is still there at the same absolute offset, with the same size; a member
//     of a tagged record type (whose own members are checked as that record)
//     may grow when no member of old starts at or after its old end, since it
//     then only extends its parent at the end;
//   - records in FrontGrowing are compared relative to their anchor, as
//     FrontGrowing documents;
//   - every enumerator of old still exists in cur with the same value.
//
// A reserved member of old that vanished, or shrank to a part of its bytes,
// the rest taken over by new members, is listed in GrowthReport.Reused
// instead.
//
// Records defined outside the target headers (System: C library types) are
// compared by size and alignment only; an incomplete record of old has
// nothing to keep. oldVersion and curVersion name the releases in messages;
// when empty, the IRs' Version fields are used.
func CheckGrowth(old, cur *IR, oldVersion, curVersion string) *GrowthReport {
	return checkGrowth(old, cur, oldVersion, curVersion, FrontGrowing)
}

// CheckGrowthFront is CheckGrowth with a table of front-growing records
// (record -> anchor member) other than FrontGrowing.
func CheckGrowthFront(old, cur *IR, oldVersion, curVersion string, front map[string]string) *GrowthReport {
	return checkGrowth(old, cur, oldVersion, curVersion, front)
}

func checkGrowth(old, cur *IR, oldVersion, curVersion string, front map[string]string) *GrowthReport {
	if oldVersion == "" {
		oldVersion = old.Version
	}
	if curVersion == "" {
		curVersion = cur.Version
	}
	rep := &GrowthReport{OldVersion: oldVersion, CurVersion: curVersion}
	add := func(v GrowthViolation) {
		v.OldVersion, v.CurVersion = oldVersion, curVersion
		rep.Violations = append(rep.Violations, v)
	}

	curRecs := map[string]*Record{}
	for _, r := range cur.Records {
		if r.Parent == nil {
			curRecs[r.CType()] = r
		}
	}
	for _, o := range old.Records {
		if o.Parent != nil || o.Incomplete {
			continue // nested anonymous records are checked through their parent
		}
		rep.Records++
		name := o.Describe()
		c, ok := curRecs[o.CType()]
		switch {
		case !ok:
			add(GrowthViolation{Kind: "record removed", Record: name, OldSize: o.Size})
			continue
		case c.Incomplete:
			add(GrowthViolation{Kind: "record incomplete", Record: name, OldSize: o.Size})
			continue
		}
		if c.Align != o.Align {
			add(GrowthViolation{Kind: "alignment", Record: name, OldSize: o.Align, CurSize: c.Align})
		}
		if o.System || c.System {
			if c.Size < o.Size {
				add(GrowthViolation{Kind: "shrunk", Record: name, OldSize: o.Size, CurSize: c.Size})
			}
			continue
		}
		om, cm := flatMembers(o), flatMembers(c)
		rep.Members += len(om)

		var oBase, cBase int64 // offsets are compared as off - base
		anchor := front[name]
		if anchor != "" {
			rep.FrontGrowing++
			oa, oOK := findTop(om, anchor)
			ca, cOK := findTop(cm, anchor)
			if !oOK || !cOK {
				where := oldVersion
				if oOK {
					where = curVersion
				}
				add(GrowthViolation{Kind: "anchor", Record: name, Anchor: anchor,
					Detail: fmt.Sprintf("the anchor is not a top-level member in %s", release(where))})
				continue
			}
			oBase, cBase = oa.off, ca.off
			if ca.off < oa.off {
				add(GrowthViolation{Kind: "anchor", Record: name, Anchor: anchor,
					Detail: fmt.Sprintf("the front shrank: the anchor moved from %d (%s) to %d (%s)", oa.off, release(oldVersion), ca.off, release(curVersion))})
			}
			oldAfter := map[string]bool{}
			for _, m := range om {
				if m.top && m.off > oa.off {
					oldAfter[m.path] = true
				}
			}
			for _, m := range cm {
				if m.top && m.off > ca.off && !oldAfter[m.path] {
					add(GrowthViolation{Kind: "anchor", Record: name, Anchor: anchor, Member: m.path,
						Detail: fmt.Sprintf("member %s follows the anchor in %s but not in %s: members may only be added in front of the anchor", m.path, release(curVersion), release(oldVersion))})
				}
			}
		} else if c.Size < o.Size {
			add(GrowthViolation{Kind: "shrunk", Record: name, OldSize: o.Size, CurSize: c.Size})
		}

		byPath := map[string]flatMember{}
		for _, m := range cm {
			byPath[m.path] = m
		}
		oldPaths := map[string]bool{}
		for _, m := range om {
			oldPaths[m.path] = true
		}
		for _, m := range om {
			v := GrowthViolation{Record: name, Member: m.path, Anchor: anchor,
				OldOffset: m.off - oBase, OldSize: m.size}
			n, ok := byPath[m.path]
			if ok {
				v.CurOffset, v.CurSize = n.off-cBase, n.size
			}
			oEnd, cEnd := v.OldOffset+v.OldSize, v.CurOffset+v.CurSize
			within := ok && v.CurOffset >= v.OldOffset && cEnd <= oEnd && v.CurSize < v.OldSize
			if isReserved(m.path) && !m.flexible && !m.record && (!ok || within) {
				// Reserved bytes taken over by new members: see GrowthReport.Reused.
				v.Kind = "reserved shrunk"
				freed := [][2]int64{{v.OldOffset, v.CurOffset}, {cEnd, oEnd}}
				if !ok {
					v.Kind = "reserved replaced"
					freed = [][2]int64{{v.OldOffset, oEnd}}
				}
				var parts []string
				for _, f := range freed {
					if f[0] >= f[1] {
						continue
					}
					var now []string
					for _, x := range cm {
						if xo := x.off - cBase; !oldPaths[x.path] && xo < f[1] && xo+x.size > f[0] {
							now = append(now, fmt.Sprintf("%s (at %d)", x.path, xo))
						}
					}
					if len(now) == 0 {
						parts = append(parts, fmt.Sprintf("bytes %d..%d are now padding", f[0], f[1]-1))
					} else {
						parts = append(parts, fmt.Sprintf("bytes %d..%d now hold %s", f[0], f[1]-1, strings.Join(now, ", ")))
					}
				}
				v.Detail = strings.Join(parts, "; ")
				v.OldVersion, v.CurVersion = oldVersion, curVersion
				rep.Reused = append(rep.Reused, v)
				continue
			}
			if !ok {
				v.Kind = "member removed"
				add(v)
				continue
			}
			if v.CurOffset != v.OldOffset {
				v.Kind = "member moved"
				add(v)
				continue
			}
			if n.size != m.size && !(n.size > m.size && m.record && nothingAfter(om, m)) {
				v.Kind = "member resized"
				if m.flexible || n.flexible {
					v.Detail = "element size of a flexible array member"
				}
				add(v)
			}
		}
	}

	curEnums := map[string]uint64{}
	for _, e := range cur.Enums {
		for _, x := range e.Enumerators {
			curEnums[x.Name] = x.Value
		}
	}
	for _, e := range old.Enums {
		for _, x := range e.Enumerators {
			rep.Enumerators++
			v, ok := curEnums[x.Name]
			switch {
			case !ok:
				add(GrowthViolation{Kind: "enumerator removed", Member: x.Name, OldValue: x.Value})
			case v != x.Value:
				add(GrowthViolation{Kind: "enumerator value", Member: x.Name, OldValue: x.Value, CurValue: v})
			}
		}
	}

	sortViolations(rep.Violations)
	sortViolations(rep.Reused)
	return rep
}

// sortViolations orders by record (enumerators first), then offset in the
// older release, then message.
func sortViolations(vs []GrowthViolation) {
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		if a.Record != b.Record {
			return a.Record < b.Record
		}
		if a.OldOffset != b.OldOffset {
			return a.OldOffset < b.OldOffset
		}
		return a.String() < b.String()
	})
}

// isReserved reports whether a member path names reserved space:
// "reserved", "reserved2", "rsvd", "resv", "__reserved", "cmd.reserved".
func isReserved(path string) bool {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		path = path[i+1:]
	}
	name := strings.ToLower(strings.TrimLeft(path, "_"))
	for _, p := range []string{"reserved", "rsvd", "resv"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// flatMember is a member of a record with its offset from the start of the
// outermost record.
type flatMember struct {
	path     string // C path from the outermost record: "wr.rdma.rkey", "imm_data"
	off      int64
	size     int64 // the type's size; the element's for a flexible array member
	top      bool  // a direct member of the outermost record (no anonymous member in between)
	record   bool  // of a tagged (or typedef'd) struct or union type, checked on its own
	flexible bool
}

// flatMembers lists every member reachable from r by name, in declaration
// order: members of anonymous structs and unions are promoted (C reaches
// them by their own name), members of anonymous records in named members are
// listed under the member's path.
func flatMembers(r *Record) []flatMember {
	var out []flatMember
	var walk func(r *Record, base int64, prefix string, top bool)
	walk = func(r *Record, base int64, prefix string, top bool) {
		for _, m := range r.Members {
			off := base + m.Offset
			if m.Name == "" {
				if m.Type.Record != nil {
					walk(m.Type.Record, off, prefix, false)
				}
				continue
			}
			path := prefix + m.Name
			fm := flatMember{path: path, off: off, size: m.Type.Size, top: top && prefix == "", flexible: m.Flexible}
			if m.Flexible && m.Type.Elem != nil {
				fm.size = m.Type.Elem.Size
			}
			t := m.Type
			if t.Kind == KRecord && t.Record != nil && t.Record.Parent == nil {
				fm.record = true
			}
			out = append(out, fm)
			// An anonymous record in a named member (or an array of them):
			// its members are part of this record's layout.
			sub, subPath := t, path+"."
			for sub.Kind == KArray && sub.Elem != nil {
				sub, subPath = sub.Elem, strings.TrimSuffix(subPath, ".")+"[0]."
			}
			if sub.Kind == KRecord && sub.Record != nil && sub.Record.Parent != nil {
				walk(sub.Record, off, subPath, false)
			}
		}
	}
	walk(r, 0, "", true)
	return out
}

// findTop finds a direct member by name.
func findTop(ms []flatMember, name string) (flatMember, bool) {
	for _, m := range ms {
		if m.top && m.path == name {
			return m, true
		}
	}
	return flatMember{}, false
}

// nothingAfter reports whether no member of ms starts at or after the end
// of m (nested members of m itself aside): m is at the tail of its record.
func nothingAfter(ms []flatMember, m flatMember) bool {
	end := m.off + m.size
	for _, x := range ms {
		if x.path != m.path && !strings.HasPrefix(x.path, m.path+".") && x.off >= end {
			return false
		}
	}
	return true
}
