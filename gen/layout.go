package gen

import (
	"fmt"
	"strings"
)

// itemKind tells how Go reaches a C member.
type itemKind int

const (
	itemField    itemKind = iota // a struct field
	itemStorage                  // anonymous union storage: no C member of its own
	itemAccessor                 // a method returning a pointer into the record
	itemFlex                     // a method returning the flexible array as a slice
)

// item is one member of a record's Go layout.
type item struct {
	kind   itemKind
	cPath  string // C member name as offsetof spells it from the record
	goName string
	off    int64 // absolute offset in the record
	typ    *Type
	shares string // for accessors: the union member the storage is named after
	pos    Pos    // the member's declaration; a storage field's is its union's
}

// layoutOf lays a record out for Go: the fields in offset order and the
// accessor methods for what shares storage in unions.
//
// A named member becomes a field. The members of an anonymous struct are
// promoted into the record, as C does. An anonymous union contributes its
// first member that fills it exactly (same size and alignment) as a field and
// every other member as an accessor; if none fills it, a blank storage field
// with the union's size and alignment stands in and all members are
// accessors. A flexible array member is an accessor returning a slice.
func layoutOf(r *Record) []item {
	var items []item
	if r.Union {
		items = unionItems(r, 0)
	} else {
		for _, m := range r.Members {
			items = append(items, memberItems(m, 0)...)
		}
	}
	return items
}

func memberItems(m *Member, base int64) []item {
	off := base + m.Offset
	switch {
	case m.Flexible:
		return []item{{kind: itemFlex, cPath: m.Name, goName: fieldName(m.Name), off: off, typ: m.Type.Elem, pos: m.Pos}}
	case m.Name != "":
		return []item{{kind: itemField, cPath: m.Name, goName: fieldName(m.Name), off: off, typ: m.Type, pos: m.Pos}}
	case m.Type.Record != nil && !m.Type.Record.Union:
		var items []item
		for _, sub := range m.Type.Record.Members {
			items = append(items, memberItems(sub, off)...)
		}
		return items
	default:
		return unionItems(m.Type.Record, off)
	}
}

// unionItems lays out a union placed at off.
func unionItems(u *Record, off int64) []item {
	var items []item
	primary := -1
	for i, m := range u.Members {
		if m.Name != "" && !m.Flexible && m.Type.Size == u.Size && m.Type.Align == u.Align {
			primary = i
			break
		}
	}
	shares := ""
	if primary >= 0 {
		m := u.Members[primary]
		items = append(items, item{kind: itemField, cPath: m.Name, goName: fieldName(m.Name), off: off, typ: m.Type, pos: m.Pos})
		shares = m.Name
	} else {
		items = append(items, item{kind: itemStorage, goName: "_", off: off, pos: u.Pos,
			typ: &Type{Kind: KArray, Len: u.Size / u.Align, Size: u.Size, Align: u.Align,
				Elem: &Type{Kind: KInt, Size: u.Align, Align: u.Align}}})
	}
	for i, m := range u.Members {
		if i == primary {
			continue
		}
		for _, it := range accessorItems(m, off) {
			it.shares = shares
			items = append(items, it)
		}
	}
	return items
}

// accessorItems turns a union member into accessors: itself if named, its
// leaves if it is an anonymous struct or union.
func accessorItems(m *Member, base int64) []item {
	off := base + m.Offset
	if m.Name != "" {
		return []item{{kind: itemAccessor, cPath: m.Name, goName: fieldName(m.Name), off: off, typ: m.Type, pos: m.Pos}}
	}
	var items []item
	for _, sub := range m.Type.Record.Members {
		items = append(items, accessorItems(sub, off)...)
	}
	return items
}

// checkLayout fails if two items of a record want the same Go name.
func checkLayout(r *Record, items []item) error {
	seen := map[string]string{}
	for _, it := range items {
		if it.goName == "_" {
			continue
		}
		if other, ok := seen[it.goName]; ok {
			return fmt.Errorf("%s: %s: members %s and %s both become %s", it.pos, r.Describe(), other, it.cPath, it.goName)
		}
		seen[it.goName] = it.cPath
	}
	return nil
}

// memberType is what the layout test and the static assertions check of a
// member's type, beyond its offset: its size, for an array the size of its
// element (the count follows from the two), and for an integer or enum
// (or an array of them) its signedness. A retyped member at the same offset
// (uint64_t to uint32_t before padding, uint32_t to int32_t) changes one of
// them.
type memberType struct {
	flex bool  // a flexible array member: no size of its own
	size int64 // sizeof the member
	dims int   // array dimensions: the element is the member with dims [0]
	elem *Type // the member's type with every array dimension removed
}

func memberTypeOf(it item) memberType {
	mt := memberType{flex: it.kind == itemFlex, size: it.typ.Size, elem: it.typ}
	if mt.flex {
		mt.dims = 1 // it.typ is already the element
	}
	for mt.elem.Kind == KArray {
		mt.elem = mt.elem.Elem
		mt.dims++
	}
	return mt
}

// hasSign reports whether the element is an integer with a signedness to
// check: _Bool has none in Go (bool), a float or pointer none at all, and
// plain char's is the architecture's (unsigned on arm64) where Go keeps it
// int8 on purpose (see typeOf): its size is still checked.
func (mt memberType) hasSign() bool {
	return mt.elem.Kind == KEnum || mt.elem.Kind == KInt && !mt.elem.Bool && !mt.elem.Char
}

// cMember is the C expression of member path of a record typed ct, and
// cElem that of its innermost element.
func (mt memberType) cMember(ct, path string) string {
	return fmt.Sprintf("((%s *)0)->%s", ct, path)
}

func (mt memberType) cElem(ct, path string) string {
	return mt.cMember(ct, path) + strings.Repeat("[0]", mt.dims)
}
