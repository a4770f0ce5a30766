// Package layout is the layout test of the generated packages: zlayout_c.go
// (generated) asks gcc for the size, alignment and member offsets of every
// generated struct and union, the value of every enumerator and integer
// macro, and whether each enum type and each macro's type is signed (the
// values alone cannot tell int64 -1 from uint64 0xffffffffffffffff);
// zlayout_go.go (generated) computes the same table from the Go side;
// TestLayout compares them. The hand-written tests beside them prove the
// comparison can fail.
package layout
