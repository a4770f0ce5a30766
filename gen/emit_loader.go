package gen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// The run-time loader. A generated package does not link its library: its
// C file opens the library with dlopen on first use, resolves every extern
// function the headers declare into a table, and defines each of those
// functions itself as a trampoline through that table. A binary then starts
// on a machine without rdma-core, and a function an older library lacks
// fails only its own call, with errno ENOSYS, instead of stopping the
// program at load time.
//
// Every C symbol a package defines carries the package's own prefix
// (symbolPrefix: its name and a digest of its import path), the
// trampolines included: the trampoline of ibv_create_qp in package
// github.com/goverbs/goverbs/generated/verbs is goverbs_verbs_<hash>_ibv_create_qp.
// Two packages generated from different header sets, goverbs' own and a
// user's, then link into one program. The headers' static inline functions
// and macros, the cgo stubs and other C code still say ibv_create_qp: a
// "#pragma redefine_extname ibv_create_qp <prefix>ibv_create_qp" ahead of
// the headers (in the cgo preamble, and in the z<pkg>_names.h each package
// ships for C code of packages that import it) makes GCC emit the
// prefixed symbol for every call by that name. Both packages' tables
// dlopen the same soname, which the dynamic loader opens once: they reach
// the same library and the same objects.
//
// The trampolines are compiled in a translation unit that includes none of
// rdma-core's headers and spell their parameters by ABI class only
// (pointers as void *, integers by size and sign): the headers' prototypes,
// with their const qualifiers, never meet these definitions, and the calling
// convention is the same. They are hidden, so they never interpose on
// libibverbs' own symbols for librdmacm or a provider.

// libloadPath is the package the generated loaders report errors through.
const libloadPath = "github.com/goverbs/goverbs/libload"

// externsOf lists the extern functions of package spec, those behind a
// macro included, in source order: their index is their slot in the C table.
func (e *emitter) externsOf(spec *PackageSpec) []*Func {
	var ext []*Func
	for _, fn := range e.ir.Funcs {
		if fn.Kind == FuncExtern && fn.Package == spec.Name {
			ext = append(ext, fn)
		}
	}
	for _, fn := range e.ir.Shadowed {
		if spec.owns(fn.Pos.File) {
			ext = append(ext, fn)
		}
	}
	sortByPos(ext, funcKey)
	return ext
}

// symbolPrefix is the prefix of every C symbol of the generated package
// name at importPath: "goverbs_", the name, the first 8 hex digits of the
// SHA-256 of the import path, "_". Deterministic, a valid C identifier, and
// different for two packages of one program, whose import paths differ.
func symbolPrefix(name, importPath string) string {
	sum := sha256.Sum256([]byte(importPath))
	return "goverbs_" + cIdent(name) + "_" + hex.EncodeToString(sum[:4]) + "_"
}

// cIdent replaces what a C identifier cannot hold with '_'.
func cIdent(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// cPrefix is the prefix of the C symbols of package spec.
func (e *emitter) cPrefix(spec *PackageSpec) string {
	return symbolPrefix(spec.Name, e.pkgPath(spec.Name))
}

// hasLoader reports whether package spec gets a loader: a library and at
// least one extern function.
func (e *emitter) hasLoader(spec *PackageSpec) bool {
	return spec.Library.Soname != "" && len(e.externsOf(spec)) > 0
}

// extnamePragmas renames, for GCC, every extern function of package spec to
// its trampoline: placed before the headers, a pragma makes each call by
// the C name, from a static inline function, a macro's expansion or a cgo
// stub, reference the prefixed symbol. Before, because GCC expands macros
// in this pragma: ahead of the headers no macro shadows a name yet.
func (e *emitter) extnamePragmas(spec *PackageSpec) string {
	if !e.hasLoader(spec) {
		return ""
	}
	p := e.cPrefix(spec)
	var b strings.Builder
	for _, fn := range e.externsOf(spec) {
		fmt.Fprintf(&b, "#pragma redefine_extname %s %s%s\n", fn.Name, p, fn.Name)
	}
	return b.String()
}

// preamblePragmas are the extname pragmas of every package of the run, for
// a cgo preamble: a package's headers include other packages' (rdma_cma.h
// includes verbs.h, and rdma_verbs.h's inline functions call libibverbs),
// whose calls must reach those packages' trampolines. A pragma for a name
// the translation unit never declares does nothing.
func (e *emitter) preamblePragmas() string {
	var b strings.Builder
	for i := range e.specs {
		if s := e.extnamePragmas(&e.specs[i]); s != "" {
			fmt.Fprintf(&b, "// Calls by C name reach package %s's trampolines (z%s_load.c).\n%s", e.specs[i].Name, e.specs[i].Name, s)
		}
	}
	return b.String()
}

// namesFile is z<pkg>_names.h: the extname pragmas of package spec, for the
// C files of a package that imports it and includes rdma-core's headers
// (hand/ does). Included before those headers, it makes their calls reach
// this package's trampolines; without it they reference the bare C names,
// which nothing in the program defines, and the link fails.
func (e *emitter) namesFile(spec *PackageSpec) *File {
	if !e.hasLoader(spec) {
		return nil
	}
	guard := strings.ToUpper(e.cPrefix(spec)) + "NAMES_H"
	var b strings.Builder
	fmt.Fprintf(&b, "// %s\n// Code generated by the command above from rdma-core %s. DO NOT EDIT.\n\n", e.opt.Command, orUnknownVersion(e.ir.Version))
	fmt.Fprintf(&b, `// Package %[2]s
// defines the extern functions of its headers as trampolines (z%[1]s_load.c)
// whose C symbols carry its prefix %[4]s. C code that calls
// them includes this file before any of those headers, so that its calls by
// C name reach the trampolines. It must come first because GCC expands
// macros in #pragma redefine_extname, and the headers shadow some of these
// functions with macros.

#ifndef %[3]s
#define %[3]s

`, spec.Name, e.pkgPath(spec.Name), guard, e.cPrefix(spec))
	b.WriteString(e.extnamePragmas(spec))
	fmt.Fprintf(&b, "\n#endif // %s\n", guard)
	return &File{Path: path.Join(spec.Name, "z"+spec.Name+"_names.h"), Data: []byte(b.String())}
}

// loaderDecls declares the loader's C entry points for the cgo preamble.
func (e *emitter) loaderDecls(spec *PackageSpec) string {
	if !e.hasLoader(spec) {
		return ""
	}
	p := e.cPrefix(spec)
	return fmt.Sprintf("\n// The run-time loader (z%s_load.c).\nint %sload(void);\nconst char *%sload_error(void);\nconst char *%spath(void);\nint %shas(int);\nvoid *%saddress(int);\n",
		spec.Name, p, p, p, p, p)
}

// loaderAPI emits the Go side of the loader: Load, LibraryPath, Available
// and the table they use.
func (e *emitter) loaderAPI(f *jen.File, spec *PackageSpec) {
	ext := e.externsOf(spec)
	if spec.Library.Soname == "" || len(ext) == 0 {
		return
	}
	p := e.cPrefix(spec)
	lib := spec.Library
	since := jen.Dict{}
	index := jen.Dict{}
	for i, fn := range ext {
		index[jen.Lit(fn.Name)] = jen.Lit(i)
		if v := e.opt.Since[fn.Name]; v != "" {
			since[jen.Lit(fn.Name)] = jen.Lit(v)
		}
	}
	f.Commentf("library describes %s, which package %s opens on first use.", lib.Soname, spec.Name)
	fields := jen.Dict{
		jen.Id("Soname"):  jen.Lit(lib.Soname),
		jen.Id("Package"): jen.Lit(lib.Package),
	}
	if e.opt.Since != nil { // dated by the pinned releases; nil Since: not dated
		fields[jen.Id("Since")] = jen.Map(jen.String()).String().Values(since)
	}
	f.Var().Id("library").Op("=").Op("&").Qual(libloadPath, "Library").Values(fields)
	f.Line()
	f.Comment("symbols maps each extern function to its slot in the loader's table.")
	f.Var().Id("symbols").Op("=").Map(jen.String()).Int().Values(index)
	f.Line()
	f.Commentf("Load opens %s, once: every stub does so on its first call, so calling", lib.Soname)
	f.Comment("Load is needed only to learn early whether rdma-core is installed. It")
	f.Comment("returns nil, or a *libload.LibraryError naming the library and its package")
	f.Comment("(matching libload.ErrNoLibrary when it is not installed). Without the")
	f.Comment("library every extern function fails with errno ENOSYS and returns its")
	f.Comment("failure value, and Available says so.")
	f.Func().Id("Load").Params().Error().Block(
		jen.If(jen.Qual("C", p+"load").Call().Op("==").Lit(0)).Block(jen.Return(jen.Nil())),
		jen.Return(jen.Id("library").Dot("LoadError").Call(jen.Qual("C", "GoString").Call(jen.Qual("C", p+"load_error").Call()))),
	)
	f.Line()
	f.Commentf("LibraryPath is the file %s was loaded from (its name carries the", lib.Soname)
	f.Comment("rdma-core release), or \"\" if it cannot be loaded.")
	f.Func().Id("LibraryPath").Params().String().Block(
		jen.If(jen.Id("Load").Call().Op("!=").Nil()).Block(jen.Return(jen.Lit(""))),
		jen.Return(jen.Qual("C", "GoString").Call(jen.Qual("C", p+"path").Call())),
	)
	f.Line()
	var names []jen.Code
	for _, fn := range ext {
		names = append(names, jen.Lit(fn.Name))
	}
	f.Commentf("Functions lists the C names of the %d extern functions package %s", len(ext), spec.Name)
	f.Commentf("resolves in %s, in header order.", lib.Soname)
	f.Func().Id("Functions").Params().Index().String().Block(
		jen.Return(jen.Index().String().Values(names...)),
	)
	f.Line()
	f.Commentf("Available reports whether the installed %s has the extern function", lib.Soname)
	f.Comment("named function (its C name). It returns nil; the Load error; or a")
	f.Comment("*libload.MissingError (matching libload.ErrNotSupported and ENOSYS) naming")
	if e.opt.Since != nil {
		f.Comment("the function and the first rdma-core release goverbs pins that declares")
		f.Comment("it, or saying that none does. A call to a missing function sets errno to")
		f.Comment("ENOSYS and returns its failure value.")
	} else {
		f.Comment("the function. A call to a missing function sets errno to ENOSYS and")
		f.Comment("returns its failure value.")
	}
	f.Func().Id("Available").Params(jen.Id("function").String()).Error().Block(
		jen.List(jen.Id("i"), jen.Id("ok")).Op(":=").Id("symbols").Index(jen.Id("function")),
		jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.Qual("fmt", "Errorf").Call(
			jen.Lit("goverbs: %s is not an extern function of package "+spec.Name), jen.Id("function")))),
		jen.If(jen.Id("err").Op(":=").Id("Load").Call(), jen.Id("err").Op("!=").Nil()).Block(jen.Return(jen.Id("err"))),
		jen.If(jen.Qual("C", p+"has").Call(jen.Qual("C", "int").Call(jen.Id("i"))).Op("!=").Lit(0)).Block(jen.Return(jen.Nil())),
		jen.Return(jen.Id("library").Dot("Missing").Call(jen.Id("function"), jen.Id("LibraryPath").Call())),
	)
	f.Line()
	f.Commentf("Address returns where the extern function named function (its C name)")
	f.Commentf("is in the loaded %s, for C code that calls it through a pointer:", lib.Soname)
	f.Comment("several calls in one cgo crossing, with no run-time check of Go")
	f.Comment("pointers. It returns 0 and Available's error when the function cannot")
	f.Comment("be called. The address stays valid for the life of the process.")
	f.Func().Id("Address").Params(jen.Id("function").String()).Params(jen.Uintptr(), jen.Error()).Block(
		jen.If(jen.Id("err").Op(":=").Id("Available").Call(jen.Id("function")), jen.Id("err").Op("!=").Nil()).Block(
			jen.Return(jen.Lit(0), jen.Id("err"))),
		jen.Return(jen.Uintptr().Call(jen.Qual("C", p+"address").Call(jen.Qual("C", "int").Call(jen.Id("symbols").Index(jen.Id("function"))))), jen.Nil()),
	)
	f.Line()
}

// loaderFile is the C file of package spec: the dlopen-once loader and one
// trampoline per extern function.
func (e *emitter) loaderFile(spec *PackageSpec) (*File, error) {
	ext := e.externsOf(spec)
	if spec.Library.Soname == "" || len(ext) == 0 {
		return nil, nil
	}
	p := e.cPrefix(spec)
	var b strings.Builder
	fmt.Fprintf(&b, "// %s\n// Code generated by the command above from rdma-core %s. DO NOT EDIT.\n\n", e.opt.Command, orUnknownVersion(e.ir.Version))
	fmt.Fprintf(&b, `// The run-time loader of package %[1]s: %[2]s is opened with dlopen on
// first use, and each of the %[3]d extern functions its headers declare is
// defined here as a hidden trampoline that calls the library's function
// through a table, or fails with errno ENOSYS when the library (or that one
// function) is missing. Every symbol here carries the package's prefix
// %[4]s, so that another package generated from other headers links
// beside this one; the pragmas of z%[1]s_names.h lead calls by C name here.
// See gen/emit_loader.go for why the parameters are spelled by ABI class.
// None of rdma-core's headers is included here.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define GOVERBS_HIDDEN __attribute__((visibility("hidden")))

static const char *const names[%[3]d] = {
`, spec.Name, spec.Library.Soname, len(ext), p)
	for _, fn := range ext {
		fmt.Fprintf(&b, "\t%q,\n", fn.Name)
	}
	fmt.Fprintf(&b, `};

static void *fns[%[1]d];
static void *handle;
static char load_error[512];
static char lib_path[PATH_MAX];
static pthread_once_t once = PTHREAD_ONCE_INIT;

// open_library runs once (pthread_once also orders its writes before every
// later reader's pthread_once call).
static void open_library(void) {
	void *h = dlopen(%[2]q, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(load_error, sizeof load_error, "%%s", e != NULL ? e : "dlopen failed");
		return;
	}
	for (int i = 0; i < %[1]d; i++)
		fns[i] = dlsym(h, names[i]);
	struct link_map *lm = NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name != NULL &&
	    realpath(lm->l_name, lib_path) == NULL)
		snprintf(lib_path, sizeof lib_path, "%%s", lm->l_name);
	handle = h;
}

static void *fn(int i) {
	pthread_once(&once, open_library);
	return fns[i];
}

GOVERBS_HIDDEN int %[3]sload(void) {
	pthread_once(&once, open_library);
	return handle != NULL ? 0 : -1;
}

GOVERBS_HIDDEN const char *%[3]sload_error(void) {
	pthread_once(&once, open_library);
	return load_error;
}

GOVERBS_HIDDEN const char *%[3]spath(void) {
	pthread_once(&once, open_library);
	return lib_path;
}

GOVERBS_HIDDEN int %[3]shas(int i) {
	return i >= 0 && i < %[1]d && fn(i) != NULL;
}

GOVERBS_HIDDEN void *%[3]saddress(int i) {
	return i >= 0 && i < %[1]d ? fn(i) : NULL;
}
`, len(ext), spec.Library.Soname, p)
	for i, f := range ext {
		t, err := trampoline(p, f, i)
		if err != nil {
			return nil, err
		}
		b.WriteString("\n" + t)
	}
	return &File{Path: path.Join(spec.Name, "z"+spec.Name+"_load.c"), Data: []byte(b.String())}, nil
}

func orUnknownVersion(v string) string {
	if v == "" {
		return "unknown"
	}
	return v
}

// trampoline is the C definition of extern function f, slot i, named with
// the package's symbol prefix.
func trampoline(prefix string, f *Func, i int) (string, error) {
	ret, err := abiType(f.Result)
	if err != nil {
		return "", fmt.Errorf("%s: result of %s: %w", f.Pos, f.Name, err)
	}
	var params, types, args []string
	for j, p := range f.Params {
		t, err := abiType(p.Type)
		if err != nil {
			return "", fmt.Errorf("%s: parameter %s of %s: %w", f.Pos, p.Name, f.Name, err)
		}
		params = append(params, abiDecl(t, fmt.Sprintf("a%d", j)))
		types = append(types, t)
		args = append(args, fmt.Sprintf("a%d", j))
	}
	if len(params) == 0 {
		params, types = []string{"void"}, []string{"void"}
	}
	fail := "return " + missingResult(f) + ";"
	call := "return fn_(" + strings.Join(args, ", ") + ");"
	if f.Result.Kind == KVoid {
		fail, call = "return;", "fn_("+strings.Join(args, ", ")+");"
	}
	ptr := fmt.Sprintf("%s (*)(%s)", ret, strings.Join(types, ", "))
	return fmt.Sprintf("// %s (%s)\nGOVERBS_HIDDEN %s(%s) {\n\t%s = (%s)fn(%d);\n\tif (fn_ == NULL) {\n\t\terrno = ENOSYS;\n\t\t%s\n\t}\n\t%s\n}\n",
		f.Name, f.Pos, abiDecl(ret, prefix+f.Name), strings.Join(params, ", "),
		strings.Replace(ptr, "(*)", "(*fn_)", 1), ptr, i, fail, call), nil
}

// abiDecl declares name with the ABI type t.
func abiDecl(t, name string) string {
	if strings.HasSuffix(t, "*") {
		return t + name
	}
	return t + " " + name
}

// abiType spells a C type by its calling-convention class: what a register
// or stack slot carries, not what the headers call it.
func abiType(t *Type) (string, error) {
	switch t.Kind {
	case KVoid:
		return "void", nil
	case KPointer, KFuncPtr, KArray:
		return "void *", nil
	case KInt, KEnum:
		if t.Bool {
			return "_Bool", nil
		}
		switch t.Size {
		case 1, 2, 4, 8:
			u := "u"
			if t.Signed {
				u = ""
			}
			return fmt.Sprintf("%sint%d_t", u, t.Size*8), nil
		}
	case KFloat:
		switch t.Size {
		case 4:
			return "float", nil
		case 8:
			return "double", nil
		}
	}
	return "", fmt.Errorf("a %d-byte %s cannot be forwarded by a generated trampoline", t.Size, kindNames[t.Kind])
}

var kindNames = map[TypeKind]string{KVoid: "void", KInt: "integer", KFloat: "floating type", KPointer: "pointer",
	KFuncPtr: "function pointer", KArray: "array", KRecord: "struct or union passed by value", KEnum: "enum"}

// missingResult is what a trampoline returns when its function is missing:
// the value its error convention uses for failure, with errno set to ENOSYS.
func missingResult(f *Func) string {
	switch f.Convention {
	case NullErrno:
		return "NULL"
	case ErrnoResult:
		return "ENOSYS"
	case MinusOneErrno, CountOrError, GetaddrinfoCode:
		return "-1"
	}
	if t := f.Result; t.Kind == KPointer || t.Kind == KFuncPtr {
		return "NULL"
	}
	return "0"
}

// sinceTable maps every extern function of the given IRs, oldest release
// first, to the oldest release that declares it.
func sinceTable(irs []*IR) map[string]string {
	sorted := append([]*IR(nil), irs...)
	sort.SliceStable(sorted, func(i, j int) bool { return versionLess(sorted[i].Version, sorted[j].Version) })
	since := map[string]string{}
	for _, ir := range sorted {
		for _, fn := range append(append([]*Func(nil), ir.Funcs...), ir.Shadowed...) {
			if _, ok := since[fn.Name]; !ok && fn.Kind == FuncExtern {
				since[fn.Name] = ir.Version
			}
		}
	}
	return since
}

// versionLess orders rdma-core versions ("33.2" < "44.0" < "65.0")
// numerically; Build has checked that they are dotted numbers.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}
