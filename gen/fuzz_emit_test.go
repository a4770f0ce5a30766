package gen_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// FuzzEmit fuzzes the stages after the C front end: Model, Names,
// AssignConventions and Emit, on the golden header sets parsed once, whose
// IR each execution mutates as its input says (renames into collisions,
// keywords and junk, new enumerator and macro values, reordered
// declarations, other error conventions). The mutations never change a
// record's C layout, so the properties are:
//
//   - no panic escapes;
//   - every emitted Go file is gofmt-clean, and the types file type-checks;
//   - every emitted struct has the size and alignment cc/v4 gave its C
//     record, and every field commented "// member @offset" sits at that
//     offset, which is the member's offset in the IR.
//
// An execution costs milliseconds (FuzzLoad runs cc/v4 from scratch every
// time):
//
//	go test ./gen -run '^$' -fuzz FuzzEmit -fuzztime 20s
func FuzzEmit(f *testing.F) {
	f.Add(uint8(0), []byte{})
	f.Add(uint8(1), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(2), []byte{6, 0, 1, 6, 1, 2, 6, 2, 3, 5, 0, 0})
	f.Add(uint8(0), []byte{1, 0, 0, 1, 0, 1, 0, 0, 2, 2, 3, 3})
	f.Add(uint8(1), []byte{3, 0, 255, 3, 1, 128, 2, 0, 5, 4, 0, 1})
	f.Fuzz(func(t *testing.T, which uint8, ops []byte) {
		ir := deepCopy(emitSeeds(t)[int(which)%len(goldenCases)])
		rules := mutate(ir, ops)
		specs := goldenSpecs()
		if err := gen.Names(ir, specs); err != nil {
			return // a collision, reported as an error: fine
		}
		if err := gen.AssignConventions(ir, rules); err != nil {
			return // a convention that does not fit: fine
		}
		files, err := gen.Emit(ir, specs, gen.EmitOptions{
			Command: "fuzz", ImportRoot: "example.com/fuzz", LayoutPkg: "example.com/fuzz/layout",
		})
		if err != nil {
			return
		}
		checkEmitted(t, ir, files)
	})
}

var (
	emitSeedsOnce sync.Once
	emitSeedsL    []*gen.IR
	emitSeedsErr  error
)

// emitSeeds loads and models the golden header sets once per process; each
// execution works on a deep copy (Model itself costs 4-13 ms).
func emitSeeds(t *testing.T) []*gen.IR {
	emitSeedsOnce.Do(func() {
		for _, name := range goldenCases {
			l, err := gen.Load(filepath.Join("testdata", name, "include"), []string{"infiniband/verbs.h"})
			if err == nil {
				var ir *gen.IR
				if ir, err = gen.Model(l); err == nil {
					emitSeedsL = append(emitSeedsL, ir)
				}
			}
			if err != nil {
				emitSeedsErr = fmt.Errorf("%s: %w", name, err)
				return
			}
		}
	})
	if emitSeedsErr != nil {
		t.Fatal(emitSeedsErr)
	}
	return emitSeedsL
}

// deepCopy copies an IR, keeping which pointers are shared (a Type's
// Record is one of IR.Records).
func deepCopy(ir *gen.IR) *gen.IR {
	seen := map[uintptr]reflect.Value{}
	var cp func(v reflect.Value) reflect.Value
	cp = func(v reflect.Value) reflect.Value {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return v
			}
			if c, ok := seen[v.Pointer()]; ok {
				return c
			}
			c := reflect.New(v.Type().Elem())
			seen[v.Pointer()] = c
			c.Elem().Set(cp(v.Elem()))
			return c
		case reflect.Struct:
			c := reflect.New(v.Type()).Elem()
			for i := range v.NumField() {
				c.Field(i).Set(cp(v.Field(i)))
			}
			return c
		case reflect.Slice:
			if v.IsNil() {
				return v
			}
			c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			for i := range v.Len() {
				c.Index(i).Set(cp(v.Index(i)))
			}
			return c
		case reflect.Map:
			if v.IsNil() {
				return v
			}
			c := reflect.MakeMapWithSize(v.Type(), v.Len())
			for it := v.MapRange(); it.Next(); {
				c.SetMapIndex(it.Key(), cp(it.Value()))
			}
			return c
		}
		return v
	}
	return cp(reflect.ValueOf(ir)).Interface().(*gen.IR)
}

// junkNames are what a rename may pick: C identifiers that collide with
// each other and with the generator's own names, Go keywords and
// predeclared names, a non-ASCII one. (Only C identifiers: the IR comes
// from a C front end, so an empty member name always means an anonymous
// struct or union, and the stages may rely on that.)
var junkNames = []string{"ibv_a", "ibv_a", "IBV_A", "type", "func", "len", "_", "ibv_", "__x", "x__y",
	"ibv_qp", "IBV_QP", "ibv_wr_send", "IBV_WR_SEND", "Raw", "é", "ibv_1", "ibv_sge", "ibv_post_recv"}

// mutate changes ir in place as ops says, three bytes an operation, and
// returns the error-convention table to use.
func mutate(ir *gen.IR, ops []byte) []gen.ConventionRule {
	pick := func(b byte, n int) int { return int(b) % n }
	name := func(b byte) string { return junkNames[pick(b, len(junkNames))] }
	convs := []gen.Convention{gen.CannotFail, gen.NullErrno, gen.ErrnoResult, gen.MinusOneErrno, gen.CountOrError}
	rules := []gen.ConventionRule{}
	for ; len(ops) >= 3; ops = ops[3:] {
		op, a, b := ops[0]%8, ops[1], ops[2]
		switch op {
		case 0: // rename a record (its tag)
			if len(ir.Records) > 0 {
				if r := ir.Records[pick(a, len(ir.Records))]; r.Parent == nil {
					r.CName = name(b)
				}
			}
		case 1: // rename a member
			if len(ir.Records) > 0 {
				if r := ir.Records[pick(a, len(ir.Records))]; len(r.Members) > 0 {
					r.Members[pick(b, len(r.Members))].Name = name(a ^ b)
				}
			}
		case 2: // rename an enumerator or a macro
			if len(ir.Enums) > 0 && a%2 == 0 {
				e := ir.Enums[pick(a, len(ir.Enums))]
				if len(e.Enumerators) > 0 {
					e.Enumerators[pick(b, len(e.Enumerators))].Name = name(b)
				}
			} else if len(ir.Macros) > 0 {
				ir.Macros[pick(a, len(ir.Macros))].Name = name(b)
			}
		case 3: // a new value for an enumerator or a macro, within its C type
			v := uint64(b) << (8 * (a % 8))
			if a%3 == 0 {
				v = ^v
			}
			if len(ir.Enums) > 0 && a%2 == 0 {
				e := ir.Enums[pick(a, len(ir.Enums))]
				if len(e.Enumerators) > 0 {
					e.Enumerators[pick(b, len(e.Enumerators))].Value = fit(v, e.Size, e.Signed)
				}
			} else if len(ir.Macros) > 0 {
				m := ir.Macros[pick(a, len(ir.Macros))]
				m.Value = fit(v, m.Size, m.Signed)
			}
		case 4: // reorder declarations
			if n := len(ir.Enums); n > 1 {
				i, j := pick(a, n), pick(b, n)
				ir.Enums[i], ir.Enums[j] = ir.Enums[j], ir.Enums[i]
			}
			if n := len(ir.Funcs); n > 1 {
				i, j := pick(b, n), pick(a, n)
				ir.Funcs[i], ir.Funcs[j] = ir.Funcs[j], ir.Funcs[i]
			}
		case 5: // rename a function or a parameter
			if len(ir.Funcs) > 0 {
				fn := ir.Funcs[pick(a, len(ir.Funcs))]
				if len(fn.Params) > 0 && b%2 == 1 {
					fn.Params[pick(b, len(fn.Params))].Name = name(b)
				} else {
					fn.Name = name(b)
				}
			}
		case 6: // give a function another error convention
			if len(ir.Funcs) > 0 {
				fn := ir.Funcs[pick(a, len(ir.Funcs))]
				rules = append(rules, gen.ConventionRule{Name: "fuzz " + strconv.Itoa(len(rules)),
					Convention: convs[pick(b, len(convs))], Funcs: []string{fn.Name}})
			}
		case 7: // a macro becomes a pointer sentinel, or stops being one
			if len(ir.Macros) > 0 {
				m := ir.Macros[pick(a, len(ir.Macros))]
				m.Pointer = b%2 == 0
			}
		}
	}
	return append(rules, gen.ConventionRule{Name: "fuzz default", Convention: gen.CannotFail, Funcs: []string{"*"}})
}

// fit truncates v to size bytes, sign-extending when signed: a value C
// could give a constant of that type.
func fit(v uint64, size int64, signed bool) uint64 {
	if size <= 0 || size >= 8 {
		return v
	}
	bits := uint(size * 8)
	v &= 1<<bits - 1
	if signed && v>>(bits-1) == 1 {
		v |= ^uint64(0) << bits
	}
	return v
}

// memberOffset matches the comment Emit gives a struct field: "// c_name @12".
var memberOffset = regexp.MustCompile(`^// (\S+) @(\d+)`)

// checkEmitted checks what Emit produced: gofmt-clean Go, a types file that
// type-checks, and struct layouts equal to the IR's (that is, cc/v4's).
func checkEmitted(t *testing.T, ir *gen.IR, files []gen.File) {
	t.Helper()
	fset := token.NewFileSet()
	var typesFiles []*ast.File
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".go") {
			continue
		}
		formatted, err := format.Source(f.Data)
		if err != nil {
			t.Fatalf("%s does not parse: %v\n%s", f.Path, err, f.Data)
		}
		if !bytes.Equal(formatted, f.Data) {
			t.Fatalf("%s is not gofmt-clean", f.Path)
		}
		if strings.HasSuffix(f.Path, "_types.go") {
			af, err := parser.ParseFile(fset, f.Path, f.Data, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			typesFiles = append(typesFiles, af)
		}
	}
	if len(typesFiles) == 0 {
		t.Fatal("no types file emitted")
	}
	sizes := types.SizesFor("gc", "amd64")
	conf := types.Config{Importer: stdImporter(), Sizes: sizes}
	pkg, err := conf.Check("example.com/fuzz/verbs", fset, typesFiles, nil)
	if err != nil {
		t.Fatalf("the types file does not type-check: %v", err)
	}
	byGoName := map[string]*gen.Record{}
	for _, r := range ir.Records {
		if !r.System && !r.Incomplete && r.Package == "verbs" {
			byGoName[r.GoName] = r
		}
	}
	for _, af := range typesFiles {
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				r := byGoName[ts.Name.Name]
				st, ok := ts.Type.(*ast.StructType)
				if r == nil || !ok {
					continue
				}
				obj := pkg.Scope().Lookup(ts.Name.Name)
				under := obj.Type().Underlying().(*types.Struct)
				if got := sizes.Sizeof(under); got != r.Size {
					t.Fatalf("%s: Go size %d, C size %d", r.Describe(), got, r.Size)
				}
				if got := sizes.Alignof(under); got != r.Align {
					t.Fatalf("%s: Go alignment %d, C alignment %d", r.Describe(), got, r.Align)
				}
				checkOffsets(t, r, st, under, sizes)
			}
		}
	}
}

// checkOffsets compares each field commented with a C member and offset
// with that offset and with the IR member's.
func checkOffsets(t *testing.T, r *gen.Record, st *ast.StructType, under *types.Struct, sizes types.Sizes) {
	t.Helper()
	var fields []*types.Var
	for i := range under.NumFields() {
		fields = append(fields, under.Field(i))
	}
	offsets := sizes.Offsetsof(fields)
	i := 0
	for _, fl := range st.Fields.List {
		n := max(len(fl.Names), 1)
		if fl.Comment != nil {
			if m := memberOffset.FindStringSubmatch(fl.Comment.List[0].Text); m != nil {
				want, _ := strconv.ParseInt(m[2], 10, 64)
				if offsets[i] != want {
					t.Fatalf("%s: field %s (%s) at Go offset %d, commented %d", r.Describe(), fields[i].Name(), m[1], offsets[i], want)
				}
				if !memberAt(r, m[1], want) {
					t.Fatalf("%s: field %s says member %s @%d, which the IR does not have", r.Describe(), fields[i].Name(), m[1], want)
				}
			}
		}
		i += n
	}
}

// memberAt reports whether r has a member named name at offset off.
func memberAt(r *gen.Record, name string, off int64) bool {
	if name == "padding" {
		return true // the generator's own filler: its offset is checked above
	}
	for _, m := range r.Members {
		if m.Offset == off && (m.Name == name || strings.HasSuffix(name, "[0]")) {
			return true
		}
		// The members of an anonymous struct member are promoted, at
		// offsets relative to the outer record.
		if m.Name == "" && m.Type.Kind == gen.KRecord && memberAt(m.Type.Record, name, off-m.Offset) {
			return true
		}
	}
	return false
}

var (
	stdImporterOnce sync.Once
	stdImp          types.Importer
)

// stdImporter type-checks the standard library from source once per
// process and keeps it.
func stdImporter() types.Importer {
	stdImporterOnce.Do(func() { stdImp = importer.ForCompiler(token.NewFileSet(), "source", nil) })
	return stdImp
}
