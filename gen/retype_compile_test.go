package gen_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// modulePath is the module the committed generated packages belong to.
const modulePath = "github.com/goverbs/goverbs"

// TestRetypesCompile proves every entry of the Retypes table on the
// committed generated packages (../generated, which check-generated ties
// to the generator): for each parameter, result and member an entry
// retypes, a snippet that passes the enum's constants (OR'd) type-checks
// with no conversion, and two that pass a constant of another enum type,
// or a variable of the integer type the C declaration has (and of uint32),
// fail with "cannot use". The snippets are type-checked with go/types
// against the packages' source, cgo's C.* references left unresolved
// (FakeImportC): no C compiler runs, and the whole takes about a second.
// Every entry must apply to the vendored headers: one that matches
// nothing there (a misspelt function, member or enum) fails here.
func TestRetypesCompile(t *testing.T) {
	specs := gen.Packages()
	ir := modelOf(t, filepath.Join("..", "headers", "vendored", "include"), gen.Roots)
	if err := gen.Names(ir, specs); err != nil {
		t.Fatal(err)
	}
	for _, p := range ir.StalePatches {
		if strings.Contains(p, ": retype ") || strings.Contains(p, ": no-RDMA ") {
			t.Errorf("table entry matches nothing in the vendored headers: %s", p)
		}
	}
	entries := map[string]bool{} // "pkg: key" of every Retypes entry
	for _, s := range specs {
		for k := range s.Retypes {
			entries[s.Name+": "+k] = false
		}
	}

	loader := newSourceLoader(t, filepath.Join("..", "generated"), modulePath+"/generated")
	var good, bad snippets
	covered := 0
	cover := func(pkg, key string) {
		k := pkg + ": " + key
		if _, ok := entries[k]; !ok {
			t.Errorf("%s carries an enum type that no Retypes entry gives it", k)
		}
		if !entries[k] {
			covered++
		}
		entries[k] = true
	}
	other := func(en *gen.Enum) string { // a constant of another enum type of the same size
		if en.CName == "ibv_send_flags" {
			return "verbs.AccessLocalWrite"
		}
		return "verbs.SendSignaled"
	}

	for _, fn := range ir.Funcs {
		sig := loader.funcSig(fn.Package, fn.GoName)
		for i, p := range fn.Params {
			pointer, en := false, p.Type.GoEnum
			if p.Type.Kind == gen.KPointer && p.Type.Elem.GoEnum != nil {
				pointer, en = true, p.Type.Elem.GoEnum
			}
			if en == nil {
				continue
			}
			cover(fn.Package, fn.Name+"."+p.Name)
			if sig == nil {
				t.Errorf("%s.%s: no such function in the generated package", fn.Package, fn.GoName)
				continue
			}
			cType := p.Type
			if pointer {
				cType = p.Type.Elem
			}
			call := func(arg string) string {
				args := make([]string, sig.Params().Len())
				for j := range args {
					args[j] = "*new(" + types.TypeString(sig.Params().At(j).Type(), qualifier) + ")"
				}
				args[i] = arg
				return fmt.Sprintf("%s.%s(%s)", fn.Package, fn.GoName, strings.Join(args, ", "))
			}
			what := fmt.Sprintf("%s parameter %s (%s)", fn.Name, p.Name, en.GoName)
			if pointer {
				good.add(what, fmt.Sprintf("var v %s = %s", enumType(en), constants(en)), call("&v"))
				bad.add(what+" given another enum's", "var v = "+other(en), call("&v"))
				for _, plain := range plainTypes(cType) {
					bad.add(what+" given a plain "+plain, "var v "+plain, call("&v"))
				}
				continue
			}
			good.add(what, call(constants(en)))
			bad.add(what+" given another enum's", call(other(en)))
			for _, plain := range plainTypes(cType) {
				bad.add(what+" given a plain "+plain, "var v "+plain, call("v"))
			}
		}
		if en := fn.Result.GoEnum; en != nil {
			cover(fn.Package, fn.Name+".return")
			if sig == nil {
				t.Errorf("%s.%s: no such function in the generated package", fn.Package, fn.GoName)
				continue
			}
			args := make([]string, sig.Params().Len())
			for j := range args {
				args[j] = "*new(" + types.TypeString(sig.Params().At(j).Type(), qualifier) + ")"
			}
			call := fmt.Sprintf("%s.%s(%s)", fn.Package, fn.GoName, strings.Join(args, ", "))
			lhs := "v"
			if sig.Results().Len() == 2 { // with an error: an older pinned release lacks it
				lhs = "v, _"
			}
			what := fmt.Sprintf("%s's result (%s)", fn.Name, en.GoName)
			good.add(what, "var v "+enumType(en), lhs+" = "+call, "_ = v")
			for _, plain := range plainTypes(fn.Result) {
				bad.add(what+" read into a plain "+plain, "var v "+plain, lhs+" = "+call, "_ = v")
			}
		}
	}
	for _, r := range ir.Records {
		if r.Parent != nil || r.CName == "" {
			continue
		}
		for _, m := range retypedMembers(r, nil) {
			key := r.CName + "." + strings.Join(m.path, ".")
			cover(r.Package, key)
			expr, ok := gen.MemberExpr(r, m.path, "r")
			if !ok {
				t.Errorf("%s: no Go member reaches it", key)
				continue
			}
			en := m.typ.GoEnum
			decl := fmt.Sprintf("var r %s.%s", r.Package, r.GoName)
			what := fmt.Sprintf("member %s (%s)", key, en.GoName)
			good.add(what, decl, expr+" = "+constants(en), "_ = r")
			bad.add(what+" given another enum's", decl, expr+" = "+other(en), "_ = r")
			for _, plain := range plainTypes(m.typ) {
				bad.add(what+" given a plain "+plain, decl, "var v "+plain, expr+" = v", "_ = r")
			}
		}
	}
	for k, seen := range entries {
		if !seen && !isStale(ir.StalePatches, k) {
			t.Errorf("%s: the entry reached nothing in the generated packages", k)
		}
	}
	if t.Failed() {
		return
	}

	if errs := loader.check("good", good.file()); len(errs) > 0 {
		for _, e := range errs {
			t.Errorf("a snippet that must compile does not: %s: %s", good.what(e.line), e.msg)
		}
	}
	errs := loader.check("bad", bad.file())
	failed := map[int]string{}
	for _, e := range errs {
		failed[e.line] += e.msg + "; "
	}
	for line, what := range bad.lines {
		msg, ok := failed[line]
		switch {
		case !ok:
			t.Errorf("%s compiles: the Go type does not keep it out", what)
		case !strings.Contains(msg, "cannot use"):
			t.Errorf("%s fails, but not as a type mismatch: %s", what, msg)
		}
	}
	t.Logf("%d table entries, %d snippets that compile, %d that must not (and do not)", covered, len(good.lines), len(bad.lines))
}

// isStale reports whether entry ("pkg: key") is among the stale patches
// (which the test has reported already).
func isStale(stale []string, entry string) bool {
	pkg, key, _ := strings.Cut(entry, ": ")
	for _, s := range stale {
		if strings.HasPrefix(s, pkg+": retype "+key) {
			return true
		}
	}
	return false
}

// retypedMember is a member (by its C path from the top record) that a
// Retypes entry retyped.
type retypedMember struct {
	path []string
	typ  *gen.Type
}

// retypedMembers lists the retyped members of r, through anonymous
// members and into records defined inside it, as a Retypes key reaches
// them.
func retypedMembers(r *gen.Record, prefix []string) []retypedMember {
	var out []retypedMember
	for _, m := range r.Members {
		switch {
		case m.Type.GoEnum != nil:
			out = append(out, retypedMember{append(append([]string(nil), prefix...), m.Name), m.Type})
		case m.Type.Kind != gen.KRecord:
		case m.Name == "":
			out = append(out, retypedMembers(m.Type.Record, prefix)...)
		case m.Type.Record.Parent == r:
			out = append(out, retypedMembers(m.Type.Record, append(append([]string(nil), prefix...), m.Name))...)
		}
	}
	return out
}

// enumType spells en's Go type from the snippet's package.
func enumType(en *gen.Enum) string { return en.Package + "." + en.GoName }

// constants are two of en's enumerators OR'd, or its only one: what a
// caller passes.
func constants(en *gen.Enum) string {
	var cs []string
	for _, x := range en.Enumerators {
		if len(cs) < 2 {
			cs = append(cs, en.Package+"."+x.GoName)
		}
	}
	return strings.Join(cs, "|")
}

// plainTypes are the integer types a retyped C integer t must refuse: the
// Go type of t's own C type (what the stub or field had before the
// patch), and uint32.
func plainTypes(t *gen.Type) []string {
	own := fmt.Sprintf("int%d", t.Size*8)
	if !t.Signed {
		own = "u" + own
	}
	if own == "uint32" {
		return []string{own}
	}
	return []string{own, "uint32"}
}

// qualifier spells a package by its name in snippets.
func qualifier(p *types.Package) string { return p.Name() }

// snippets are the functions of one snippet file, a line each, keyed by
// line for the type checker's errors.
type snippets struct {
	body  []string
	lines map[int]string // line -> what the snippet proves
}

// add adds a function "func _() { STMT; STMT... }" on a line of its own.
func (s *snippets) add(what string, stmts ...string) {
	if s.lines == nil {
		s.lines = map[int]string{}
	}
	s.body = append(s.body, "func _() { "+strings.Join(stmts, "; ")+" }")
	s.lines[len(s.body)+snippetHeaderLines] = what
}

// snippetHeaderLines is how many lines file puts before the first snippet.
const snippetHeaderLines = 9

func (s *snippets) file() string {
	return `package snippets

import (
	"unsafe"

	"` + modulePath + `/generated/rdmacm"
	"` + modulePath + `/generated/verbs"
)
var _, _, _ = unsafe.Pointer(nil), rdmacm.Load, verbs.Load
` + strings.Join(s.body, "\n") + "\n"
}

func (s *snippets) what(line int) string {
	if w, ok := s.lines[line]; ok {
		return w
	}
	return fmt.Sprintf("line %d", line)
}

// sourceLoader type-checks the generated packages from their source, as
// `go build` selects their files for this machine, with C.* unresolved
// (types.Config.FakeImportC), and snippets against them.
type sourceLoader struct {
	t       *testing.T
	dir     string // the generated packages' root directory
	root    string // its import path
	fset    *token.FileSet
	std     types.Importer
	pkgs    map[string]*types.Package
	checked map[string]error
}

func newSourceLoader(t *testing.T, dir, root string) *sourceLoader {
	fset := token.NewFileSet()
	return &sourceLoader{t: t, dir: dir, root: root, fset: fset, std: importer.ForCompiler(fset, "source", nil),
		pkgs: map[string]*types.Package{}, checked: map[string]error{}}
}

func (l *sourceLoader) Import(p string) (*types.Package, error) { return l.ImportFrom(p, "", 0) }

func (l *sourceLoader) ImportFrom(p, _ string, _ types.ImportMode) (*types.Package, error) {
	var dir string
	switch {
	case strings.HasPrefix(p, l.root+"/"):
		dir = filepath.Join(l.dir, strings.TrimPrefix(p, l.root+"/"))
	case strings.HasPrefix(p, modulePath+"/"):
		dir = filepath.Join("..", strings.TrimPrefix(p, modulePath+"/"))
	default:
		return l.std.Import(p)
	}
	if pkg, ok := l.pkgs[p]; ok {
		return pkg, l.checked[p]
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, filepath.Base(n)); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(l.fset, n, nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: l, FakeImportC: true}
	pkg, err := conf.Check(p, l.fset, files, nil)
	l.pkgs[p], l.checked[p] = pkg, err
	if err != nil {
		return nil, fmt.Errorf("type-checking %s: %w", p, err)
	}
	return pkg, nil
}

// funcSig is the signature of function name of generated package pkg;
// nil if it has none.
func (l *sourceLoader) funcSig(pkg, name string) *types.Signature {
	l.t.Helper()
	p, err := l.Import(path.Join(l.root, pkg))
	if err != nil {
		l.t.Fatal(err)
	}
	fn, ok := p.Scope().Lookup(name).(*types.Func)
	if !ok {
		return nil
	}
	return fn.Type().(*types.Signature)
}

// checkError is one error of a snippet file, by line.
type checkError struct {
	line int
	msg  string
}

// check type-checks a snippet file and returns every error.
func (l *sourceLoader) check(name, src string) []checkError {
	l.t.Helper()
	f, err := parser.ParseFile(l.fset, name+".go", src, 0)
	if err != nil {
		l.t.Fatalf("snippet file %s does not parse: %v\n%s", name, err, src)
	}
	var errs []checkError
	conf := types.Config{Importer: l, Error: func(err error) {
		te := err.(types.Error)
		errs = append(errs, checkError{l.fset.Position(te.Pos).Line, te.Msg})
	}}
	_, _ = conf.Check("example.com/snippets/"+name, l.fset, []*ast.File{f}, nil)
	return errs
}
