// Package layout is the layout test of the generated packages:
// zlayout_rows.h (generated, compiled through zlayout_c.go) asks gcc for
// the size, alignment and member offsets of every generated struct and
// union, the size of every member (and of an array member's element) and
// the signedness of every integer and enum member, the value of every
// enumerator and integer macro, and whether each enum type and each macro's
// type is signed (the values alone cannot tell int64 -1 from uint64
// 0xffffffffffffffff); zlayout_go.go (generated) computes the same table
// from the Go side; TestLayout compares them.
//
// TestHeaders (zlayout_test.go) holds the SHA-256 of every header the
// packages were generated from and, each time it runs, reads the headers the
// C side compiles against and fails, naming the first that differs or is
// gone: go test's cache keys on neither headers outside the module nor on
// C_INCLUDE_PATH or CPATH, so a cached TestLayout pass says nothing of
// headers changed since. This package compiles against the vendored headers
// (#cgo CFLAGS: -I${SRCDIR}/../../headers/vendored/include), and TestHeaders
// reads them by that same path, relative to the package directory where go
// test runs it. A layout package generated without -cgo-include compiles
// against the machine's headers instead: its TestHeaders reads the -headers
// directory verbsgen was given (relative to the package if it was given
// relative), or the directory in the environment variable
// GOVERBS_LAYOUT_HEADERS (layoutcheck.HeadersEnv) when that is set.
//
// When the headers differ, the C side compiled into the test binary may be
// the build cache's, compiled against the old ones: TestLayout then compiles
// zlayout_rows.h afresh with $CC (gcc by default) and the same include
// flags, outside the build cache, and compares its rows with the Go side,
// naming every fact that changed (layoutcheck.CheckLayout). Runs on
// unchanged headers compile nothing.
//
// The hand-written tests beside them prove the comparison can fail.
package layout
