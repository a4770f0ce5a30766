// Package crecord hands a C record laid out by one generated package to
// another generated package, with no unsafe in the caller's code.
//
// Two packages generated from rdma-core's headers (goverbs' own
// generated/verbs, which hand/ is built on, and a package a user generated
// from their own header set) each declare struct ibv_context as a Go type
// of their own, verbs.Context and myverbs.Context. The C object is the
// same; the Go types differ. As converts a pointer to the one into a
// pointer to the other:
//
//	ctx, err := hand.Open(name) // ctx.Raw() is a *verbs.Context
//	...
//	err = myverbs.MyVendorOp(crecord.As[myverbs.Context](ctx.Raw()), flags)
//
// As checks what it can: both types must have the same name (generated
// names derive from the C name: Context is struct ibv_context in both) and
// the same size. It cannot check that the two header sets lay the record's
// members out alike: that is what each package's static assertions and the
// layout test do for its own headers. A record that grew only at its end
// in the newer set has a different size: As refuses it, since the newer
// package would read past the end of the older object.
package crecord

import (
	"fmt"
	"reflect"
	"unsafe"
)

// As returns p as a *T: the same C record, as the Go type T of another
// generated package. It returns nil for a nil p, and panics if T and U
// differ in name or size (a programming error, found on the first call).
// As does not allocate.
func As[T, U any](p *U) *T {
	if p == nil {
		return nil
	}
	t, u := reflect.TypeFor[T](), reflect.TypeFor[U]()
	if t.Name() != u.Name() || t.Size() != u.Size() {
		panic(fmt.Sprintf("crecord: %s (%d bytes) is not the same C record as %s (%d bytes)",
			t, t.Size(), u, u.Size()))
	}
	return (*T)(unsafe.Pointer(p))
}
