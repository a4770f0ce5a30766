package cmem

/*
#include <stdlib.h>
*/
import "C"

import (
	"bytes"
	"fmt"
	"math/bits"
	"reflect"
	"unsafe"
)

// New returns a zeroed T in C memory (calloc(1, sizeof(T))), to be freed
// with Free. It panics only when C is out of memory. New does not allocate
// Go memory.
func New[T any]() *T {
	size := unsafe.Sizeof(*new(T))
	if size == 0 {
		size = 1 // calloc(1, 0) may return NULL: a zero-size T still gets a unique address
	}
	p := C.calloc(1, C.size_t(size))
	if p == nil {
		panic(fmt.Sprintf("cmem.New[%v]: calloc of %d bytes: out of memory", reflect.TypeFor[T](), size))
	}
	return (*T)(p)
}

// NewSlice returns n zeroed Ts in C memory (calloc(n, sizeof(T))), with
// len and cap n, to be freed with FreeSlice; nil for n == 0. It panics when
// n is negative, when n*sizeof(T) overflows, and when C is out of memory.
// NewSlice does not allocate Go memory.
func NewSlice[T any](n int) []T {
	if n == 0 {
		return nil
	}
	size := unsafe.Sizeof(*new(T))
	if n < 0 {
		panic(fmt.Sprintf("cmem.NewSlice[%v](%d): negative length", reflect.TypeFor[T](), n))
	}
	hi, total := bits.Mul64(uint64(n), uint64(size))
	if hi != 0 || total > uint64(maxAlloc) {
		panic(fmt.Sprintf("cmem.NewSlice[%v](%d): %d elements of %d bytes overflow the address space", reflect.TypeFor[T](), n, n, size))
	}
	var p unsafe.Pointer
	if size == 0 {
		p = C.calloc(1, 1) // as New: a zero-size element still gets a unique address
	} else {
		p = C.calloc(C.size_t(n), C.size_t(size))
	}
	if p == nil {
		panic(fmt.Sprintf("cmem.NewSlice[%v](%d): calloc of %d bytes: out of memory", reflect.TypeFor[T](), n, total))
	}
	return unsafe.Slice((*T)(p), n)
}

// maxAlloc bounds an allocation: Go slices index with int, and no object
// may span more than half the address space.
const maxAlloc = uint64(^uint(0) >> 1)

// Free frees what New (or CString) returned. A nil p is a no-op.
func Free[T any](p *T) {
	if p != nil {
		C.free(unsafe.Pointer(p))
	}
}

// FreeSlice frees what NewSlice returned, resliced or not: it frees the
// allocation that begins at the slice's first element. Pass the slice
// NewSlice returned (or a reslice s[:k] of it, never s[k:] with k > 0). A
// nil or zero-capacity s is a no-op.
func FreeSlice[T any](s []T) {
	if cap(s) > 0 {
		C.free(unsafe.Pointer(unsafe.SliceData(s)))
	}
}

// CString returns a NUL-terminated copy of s in C memory (malloc), for a
// stub's char * parameter (rdmacm.Getaddrinfo's node); free it with Free. C
// reads it up to its first NUL: a string with a NUL byte inside reaches C
// cut short there.
func CString(s string) *int8 {
	return (*int8)(unsafe.Pointer(C.CString(s)))
}

// GoString returns a copy of the NUL-terminated C string at p (what
// verbs.GetDeviceName or rdmacm.EventStr return); "" for nil.
func GoString(p *int8) string {
	if p == nil {
		return ""
	}
	return C.GoString((*C.char)(unsafe.Pointer(p)))
}

// ArrayString returns a copy of a fixed-size C char array (verbs.Device's
// Name, verbs.DeviceAttr's FWVer; pass a[:]) up to its first NUL, or all of
// it when it holds none.
func ArrayString(a []int8) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), len(a))
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Addr returns the address of s[0] as a uint64, for the address fields the
// device reads (verbs.SGE's Addr, a remote address advertised to a peer);
// 0 for an empty s. s must be C memory (NewSlice) or mmap'd: Go may move or
// free a Go slice while the device still holds its address.
func Addr[T any](s []T) uint64 {
	if len(s) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&s[0])))
}
