// Hand-written test of the golden case's generated stubs, run by gen's
// TestGolden in a temporary module against externs.c. Not generated.

package verbs

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/verberr"
)

func TestStubs(t *testing.T) {
	qp := QP{QPNum: 41}
	if got := QPNum(&qp); got != 41 {
		t.Errorf("QPNum (static inline) = %d, want 41", got)
	}
	ACKEvents(&qp, 2)
	if qp.QPNum != 43 {
		t.Errorf("ACKEvents (extern, void) left qp_num %d, want 43", qp.QPNum)
	}

	var pd PD
	buf := make([]byte, 64)
	addr := unsafe.Pointer(&buf[0])
	if mr, err := RegMR(&pd, addr, 64, AccessLocalWrite); unsafe.Pointer(mr) != addr || err != nil {
		t.Errorf("RegMR (function-like macro) = %p, %v; want %p, nil", mr, err, addr)
	}
	if mr, err := XXRegMR(&pd, addr, 64, AccessOptionalRange, 0); unsafe.Pointer(mr) != addr || err != nil {
		t.Errorf("XXRegMR = %p, %v; want %p, nil", mr, err, addr)
	}
	// NULL and errno: the errno comes back, named.
	mr, err := RegMR(&pd, addr, 0, AccessLocalWrite)
	var ve *verberr.Error
	if mr != nil || !errors.Is(err, syscall.EINVAL) || !errors.As(err, &ve) || ve.Func() != "ibv_reg_mr" {
		t.Errorf("RegMR with length 0 = %p, %v; want nil and ibv_reg_mr's EINVAL", mr, err)
	}

	var attr PortAttr
	if err := QueryPort(nil, 3, &attr); err != nil || attr.LID != 3 || attr.MaxMsgSz != 1<<31 {
		t.Errorf("QueryPort (function-like macro) = %v, %+v; want nil, lid 3, max_msg_sz 2^31", err, attr)
	}
	// An errno returned: the same.
	if err := QueryPort(nil, 0, &attr); !errors.Is(err, syscall.EINVAL) || err.Error() != "ibv_query_port: invalid argument (EINVAL)" {
		t.Errorf("QueryPort(port 0) = %v, want ibv_query_port's EINVAL", err)
	}

	sge := MakeSGE(0x1000, 256)
	if sge.Addr != 0x1000 || sge.Length != 256 || sge.LKey != 7 {
		t.Errorf("MakeSGE (struct result) = %+v", sge)
	}
	if n := SGEBytes(sge, AccessLocalWrite); n != 256 {
		t.Errorf("SGEBytes (struct and enum arguments) = %d, want 256", n)
	}
	if p := NodeName(1); p == nil || *p != 'C' {
		t.Errorf("NodeName (const char * result) = %v", p)
	}

	// Pointers to arrays: *[4]uint32 in Go, uint32_t (*)[4] in C.
	var grid [3][4]uint32
	grid[1] = [4]uint32{1, 2, 3, 4}
	if row := Row(&grid[0], 1); row != &grid[1] {
		t.Errorf("Row (pointer to array result) = %p, want %p", row, &grid[1])
	}
	if row := GridRow(&grid[0], 1); row != &grid[1] {
		t.Errorf("GridRow (function-like macro, pointer to array) = %p, want %p", row, &grid[1])
	}
	if n := RowSum(&grid[1]); n != 10 {
		t.Errorf("RowSum (pointer to array argument) = %d, want 10", n)
	}

	// A function pointer and a pointer to one, through a function-like
	// macro's C wrapper, which takes them as void *.
	reader := QPNumReader()
	var last unsafe.Pointer
	qp7 := QP{QPNum: 7}
	if n := Apply(&qp7, reader, unsafe.Pointer(&last)); n != 7 || reader == nil || last != reader {
		t.Errorf("Apply (function-like macro, function pointers) = %d, stored %p; want 7, %p", n, last, reader)
	}

	// Parameters named uint32, int32, nil, iota and len.
	if n := Mask(0xff0, 0x0ff, 1, 2, 3); n != 0x0f0+6 {
		t.Errorf("Mask (parameters named as Go's predeclared identifiers) = %#x, want %#x", n, 0x0f0+6)
	}

	// const-qualified pointers, as parameters and results, through the C
	// wrappers of function-like macros (Names, Attr, Reader) and of
	// inlines whose errno is made positive (Find*, CountNames).
	var pin runtime.Pinner
	defer pin.Unpin()
	mlx5, rxe := []byte("mlx5\x00"), []byte("rxe\x00")
	pin.Pin(&mlx5[0])
	pin.Pin(&rxe[0])
	names := [3]*int8{(*int8)(unsafe.Pointer(&mlx5[0])), (*int8)(unsafe.Pointer(&rxe[0])), nil}
	var first *int8
	one := PortAttr{LID: 1}
	if got := Names(&names[0], &first, &one); got != &names[0] || first != names[1] {
		t.Errorf("Names (macro, const char *const * and const char **) = %p, first %p; want %p, %p", got, first, &names[0], names[1])
	}
	first = nil
	if got, err := FindNames(&names[0], &first); got != &names[0] || first != names[0] || err != nil {
		t.Errorf("FindNames = %p, %v, first %p; want %p, nil, %p", got, err, first, &names[0], names[0])
	}
	if n, err := CountNames(&names[0], names[1]); n != 1 || err != nil {
		t.Errorf("CountNames(stop at the second) = %d, %v; want 1, nil", n, err)
	}
	if got := Label(&names[0], 1); got != names[1] {
		t.Errorf("Label (macro, unnamed const char *const * parameter) = %p, want %p", got, names[1])
	}
	if got := GridCell(&grid[1], 2); got != 3 {
		t.Errorf("GridCell (macro, unnamed const uint32_t (*)[4] parameter) = %d, want 3", got)
	}
	none := [1]*int8{}
	if got, err := FindNames(&none[0], &first); got != nil || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("FindNames(no names) = %p, %v; want nil, ENOENT", got, err)
	}
	if n, err := CountNames(&none[0], nil); n != 0 || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("CountNames(no names) = %d, %v; want 0, ENOENT", n, err)
	}
	if n, err := Count(&none[0]); n != 0 || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Count (macro over CountNames, no names) = %d, %v; want 0, ENOENT", n, err)
	}
	// rdma_seterrno(-ENOENT) leaves errno -2, which cgo would box (an
	// errno of 256 and up, as an unsigned value) at every failed call:
	// the wrappers make it positive first, the macro's too.
	for name, f := range map[string]func(){
		"CountNames": func() { CountNames(&none[0], nil) },
		"Count":      func() { Count(&none[0]) },
	} {
		if a := testing.AllocsPerRun(20, f); a != 0 {
			t.Errorf("%s failing: %v allocations a call, want 0", name, a)
		}
	}

	pin.Pin(&one)
	attrs := [2]*PortAttr{&one, nil}
	var lastAttr *PortAttr
	if got := Attr(&attrs[0], 0, &lastAttr); got != &one || lastAttr != &one {
		t.Errorf("Attr (macro, const struct pointers) = %p, last %p; want %p", got, lastAttr, &one)
	}
	lastAttr = nil
	if got, err := FindAttr(&attrs[0], &lastAttr); got != &one || lastAttr != &one || err != nil {
		t.Errorf("FindAttr = %p, %v, last %p; want %p, nil, %[4]p", got, err, lastAttr, &one)
	}
	if got, err := FindAttr(&attrs[1], &lastAttr); got != nil || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("FindAttr(no attributes) = %p, %v; want nil, ENOENT", got, err)
	}

	// Pointers passed unchecked: every pointer of a data-path function,
	// and a handle slot anywhere. Each reaches C as the type its header
	// spells, a stack local's slot included.
	sges := [2]SGE{{Length: 10}, {Length: 20}}
	rows := [2][4]uint32{{1}, {2}}
	var wr RecvWR
	var bad *RecvWR
	if n := PostRows(&qp7, &sges[0], 2, &rows[0], unsafe.Pointer(&wr), &names[0], &bad); n != 7+10+1+20+2 || bad != &wr {
		t.Errorf("PostRows (data path, unchecked) = %d, bad_wr %p; want %d, %p", n, bad, 7+10+1+20+2, &wr)
	}
	var qp9 QP
	pin.Pin(&qp9)
	pd9 := PD{Context: (*Context)(unsafe.Pointer(&qp9))}
	var opened *QP
	if err := OpenQP(&pd9, 9, &opened); err != nil || opened != &qp9 || qp9.QPNum != 9 {
		t.Errorf("OpenQP (handle slot) = %v, %p, qp_num %d; want nil, %p, 9", err, opened, qp9.QPNum, &qp9)
	}
	if err := OpenQP(&pd9, 0, &opened); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("OpenQP(0) = %v, want EINVAL", err)
	}
	// A slot inside a heap object that holds Go pointers, which cgo's
	// check finds, scanning all of it, and panics on: a checked argument
	// into the object (its PD) shows it.
	type node struct {
		name *string
		pd   PD
		qp   *QP
	}
	nodes := make([]node, 100)
	for i := range nodes {
		nodes[i].name = new(string)
	}
	nodes[1].pd = pd9
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Go pointer to unpinned Go pointer") {
				t.Errorf("OpenQP(&nodes[1].pd) panicked with %v, want cgo's pointer check", r)
			}
		}()
		OpenQP(&nodes[1].pd, 9, &opened)
	}()
	if err := OpenQP(&pd9, 9, &nodes[50].qp); err != nil || nodes[50].qp != &qp9 {
		t.Errorf("OpenQP(&nodes[50].qp) = %v, %p; want nil, %p", err, nodes[50].qp, &qp9)
	}

	readers := [2]unsafe.Pointer{reader, nil}
	if got := Reader(unsafe.Pointer(&readers[0]), reader); got != unsafe.Pointer(&readers[0]) {
		t.Errorf("Reader (macro, const function pointers) = %p, want %p", got, &readers[0])
	}
	if got, err := FindReader(unsafe.Pointer(&readers[0])); got != unsafe.Pointer(&readers[0]) || err != nil {
		t.Errorf("FindReader = %p, %v; want %p, nil", got, err, &readers[0])
	}
	if got, err := FindReader(unsafe.Pointer(&readers[1])); got != nil || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("FindReader(no readers) = %p, %v; want nil, ENOENT", got, err)
	}
}
