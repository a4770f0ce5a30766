// Package layoutcheck compares two tables of layout facts, one computed by
// gcc from the rdma-core headers and one by the Go compiler from the
// generated types. The generated layout tests call it; it has no cgo so that
// it also serves packages generated into other modules.
package layoutcheck

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"unsafe"
)

// Row is one fact: "sizeof(struct ibv_wc)", "_Alignof(...)",
// "offsetof(struct ibv_wc, imm_data)", "membersize(struct ibv_wc, imm_data)"
// (sizeof the member), "memberelem(struct ibv_gid, raw)" (sizeof an array
// member's element), "membersigned(struct ibv_wc, status)" (whether an
// integer or enum member, or an array's element, is signed),
// "enum IBV_WC_SUCCESS", "macro IBV_DEVICE_RAW_SCATTER_FCS",
// "signed(enum ibv_wc_status)" or "signed(macro IBV_DEVICE_RAW_SCATTER_FCS)",
// and its value (two's complement bits for constants; 1 for a signed type,
// 0 for an unsigned one).
type Row struct {
	Key   string
	Value uint64
}

// Offset is the distance from base to p, for members reached through
// accessor methods.
func Offset(base, p unsafe.Pointer) uint64 { return uint64(uintptr(p) - uintptr(base)) }

// Int returns the two's complement bits of an integer constant.
func Int[T ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr](v T) uint64 {
	return uint64(v)
}

// Signed is 1 if v's type is signed and 0 if it is unsigned, as gcc's
// ((T)-1 < 0) is: the bits Int compares are the same for int64 -1 and
// uint64 0xffffffffffffffff, and for int32 1 and uint32 1.
func Signed[T ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr](v T) uint64 {
	if ^T(0) < 0 {
		return 1
	}
	return 0
}

// SignedElem is Signed of the element type of s, which may be empty (a
// flexible array member's accessor asked for no elements).
func SignedElem[T ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr](s []T) uint64 {
	var zero T
	return Signed(zero)
}

// Diff lists every disagreement between the C and Go tables: a value that
// differs, a key only one side has, or a key one side has twice (which
// would let one of its values go unchecked). It is empty when they agree.
func Diff(c, g []Row) []string {
	var out []string
	cm := make(map[string]uint64, len(c))
	for _, r := range c {
		if _, dup := cm[r.Key]; dup {
			out = append(out, fmt.Sprintf("%s: C has the row twice", r.Key))
		}
		cm[r.Key] = r.Value
	}
	gm := make(map[string]uint64, len(g))
	for _, r := range g {
		if _, dup := gm[r.Key]; dup {
			out = append(out, fmt.Sprintf("%s: Go has the row twice", r.Key))
		}
		gm[r.Key] = r.Value
		cv, ok := cm[r.Key]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: Go has %d, C has no such row", r.Key, int64(r.Value)))
		case cv != r.Value:
			out = append(out, fmt.Sprintf("%s: C says %d, Go says %d", r.Key, int64(cv), int64(r.Value)))
		}
	}
	for _, r := range c {
		if _, ok := gm[r.Key]; !ok {
			out = append(out, fmt.Sprintf("%s: C has %d, Go has no such row", r.Key, int64(r.Value)))
		}
	}
	sort.Strings(out)
	return out
}

// Counts is how many facts of each kind a table holds.
type Counts struct {
	Types, Alignments, Offsets, Enumerators, Macros int
	// Signs are the signedness of enum types and of macros' types.
	Signs int
	// MemberSizes are the sizes of members and of array members'
	// elements, MemberSigns the signedness of integer and enum members.
	MemberSizes, MemberSigns int
}

// Count classifies the rows of a table.
func Count(rows []Row) Counts {
	var c Counts
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r.Key, "sizeof("):
			c.Types++
		case strings.HasPrefix(r.Key, "_Alignof("):
			c.Alignments++
		case strings.HasPrefix(r.Key, "offsetof("):
			c.Offsets++
		case strings.HasPrefix(r.Key, "enum "):
			c.Enumerators++
		case strings.HasPrefix(r.Key, "macro "):
			c.Macros++
		case strings.HasPrefix(r.Key, "signed("):
			c.Signs++
		case strings.HasPrefix(r.Key, "membersize("), strings.HasPrefix(r.Key, "memberelem("):
			c.MemberSizes++
		case strings.HasPrefix(r.Key, "membersigned("):
			c.MemberSigns++
		}
	}
	return c
}

func (c Counts) String() string {
	return fmt.Sprintf("%d structs and unions (size and alignment), %d member offsets, %d member and element sizes, %d member signs, %d enumerators, %d macros, %d signs (enum and macro types)",
		c.Types, c.Offsets, c.MemberSizes, c.MemberSigns, c.Enumerators, c.Macros, c.Signs)
}

// Check fails t with every difference between the tables and logs what was
// compared. version names the rdma-core release the Go side was generated from.
func Check(t testing.TB, version string, c, g []Row) {
	t.Helper()
	if len(g) == 0 {
		t.Fatal("the Go table is empty: nothing was compared")
	}
	diff := Diff(c, g)
	for _, d := range diff {
		t.Error(d)
	}
	t.Logf("layout rdma-core %s: compared %d facts with gcc: %s; %d differ", version, len(g), Count(g), len(diff))
}
