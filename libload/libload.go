// Package libload is what the generated packages share about loading
// rdma-core's libraries at run time: the library table they fill in and the
// errors a missing library or function gives.
//
// A program built with goverbs does not link libibverbs or librdmacm. Each
// generated package opens its library with dlopen on first use and resolves
// every function its headers declare; a function the installed release
// lacks fails only the call that needs it. This package holds no cgo and
// loads nothing itself: the generated packages do, and report through it.
package libload

import (
	"errors"
	"strings"
	"syscall"
)

// ErrNoLibrary matches a *LibraryError whose library file was not found
// (rdma-core is not installed). A program can test for it and fall back to
// another transport. A library that is there but fails to load (damaged, of
// another architecture, lacking a library it needs) does not match it.
var ErrNoLibrary = errors.New("goverbs: rdma-core library not installed")

// ErrNotSupported is goverbs' one sentinel for "not supported here": every
// failure meaning that the installed rdma-core, the provider or the device
// does not do what was asked matches it (errors.Is). Those are a
// *MissingError (the loaded library is older than the function that was
// called), a generated stub's EOPNOTSUPP or ENOSYS (*verberr.Error), and
// hand's errors of the same meaning (hand.ErrNotSupported is this
// sentinel). The ENOSYS that says this host has no RDMA at all
// (verberr.ErrNoRDMA) does not match it.
var ErrNotSupported = errors.New("goverbs: not supported")

// Library describes one shared library a generated package loads.
type Library struct {
	Soname  string // what dlopen is given: "libibverbs.so.1"
	Package string // the Debian and Ubuntu package that installs it: "libibverbs1"
	// Since maps a function to the oldest of the rdma-core releases goverbs
	// pins whose headers declare it. A function it does not hold is
	// declared by none of them (a vendor's addition, or a release newer
	// than the pins). Nil when the package was generated without the
	// table of pinned releases: then nothing is dated.
	Since map[string]string
}

// LoadError is the error of a failed dlopen, with dlerror's text.
func (l *Library) LoadError(reason string) error {
	return &LibraryError{Soname: l.Soname, Package: l.Package, Reason: reason}
}

// Missing is the error of a call to a function the loaded library lacks;
// path is the file the library was loaded from.
func (l *Library) Missing(function, path string) error {
	since, ok := l.Since[function]
	return &MissingError{Function: function, Soname: l.Soname, Path: path, Since: since, Unpinned: l.Since != nil && !ok}
}

// LibraryError says that an rdma-core library could not be loaded, and what
// to install. It matches syscall.ENOSYS, and ErrNoLibrary when the library
// file was not found.
type LibraryError struct {
	Soname  string
	Package string
	Reason  string // dlerror's text
}

// notFound reports whether Reason says that the library itself was not
// found, in glibc's words (dlerror names the file it could not open, which
// may be a library the soname needs, installed apart). Other C libraries'
// words count as a failure to load what was found.
func (e *LibraryError) notFound() bool {
	return e.Reason == e.Soname+": cannot open shared object file: No such file or directory"
}

func (e *LibraryError) Error() string {
	head := "goverbs: cannot load " + e.Soname + " (" + e.Reason + "): "
	if e.notFound() {
		return head + "rdma-core is not installed; install package " + e.Package +
			" (rdma-core; on Debian and Ubuntu: apt-get install " + e.Package + " ibverbs-providers)"
	}
	return head + "it could not be loaded; if the library is damaged, reinstall package " + e.Package +
		" (rdma-core; on Debian and Ubuntu: apt-get install --reinstall " + e.Package + " ibverbs-providers)"
}

// Is matches syscall.ENOSYS, the errno every call made without the
// library reports, and ErrNoLibrary when the library was not found.
func (e *LibraryError) Is(target error) bool {
	return target == ErrNoLibrary && e.notFound() || target == syscall.ENOSYS
}

// MissingError says that the loaded library lacks a function, and which
// pinned rdma-core release first has it, or that none does. It matches
// ErrNotSupported and syscall.ENOSYS (the errno the C call itself
// reported).
type MissingError struct {
	Function string
	Soname   string
	Path     string // the file the library was loaded from; empty if unknown
	// Since is the oldest pinned rdma-core release whose headers declare
	// Function; empty if none does (Unpinned) or nothing is dated.
	Since string
	// Unpinned says that no rdma-core release goverbs pins declares
	// Function: a release, if any, that has it is not known.
	Unpinned bool
}

func (e *MissingError) Error() string {
	var b strings.Builder
	b.WriteString("goverbs: ")
	b.WriteString(e.Function)
	b.WriteString(" is not in the installed ")
	b.WriteString(e.Soname)
	if e.Path != "" {
		b.WriteString(" (" + e.Path + ")")
	}
	switch {
	case e.Since != "":
		b.WriteString(": of the rdma-core releases goverbs pins, " + e.Since + " is the first that has it")
	case e.Unpinned:
		b.WriteString(": no rdma-core release goverbs pins declares it")
	default:
		b.WriteString(": the headers its package was generated from declare it")
	}
	return b.String()
}

// Is matches ErrNotSupported and syscall.ENOSYS, the errno the call itself
// reported.
func (e *MissingError) Is(target error) bool {
	return target == ErrNotSupported || target == syscall.ENOSYS
}
