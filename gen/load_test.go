package gen_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// includeDir makes an include directory holding files (path -> content).
func includeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	return dir
}

// loadModel runs Load and Model, returning the first error.
func loadModel(dir string, roots []string) error {
	l, err := gen.Load(dir, roots)
	if err != nil {
		return err
	}
	_, err = gen.Model(l)
	return err
}

// TestLoadErrors: every way a header set can be wrong gives one line naming
// the place (file:line, or the directory or header that is missing).
func TestLoadErrors(t *testing.T) {
	roots := []string{"infiniband/verbs.h"}
	for _, tc := range []struct {
		name  string
		files map[string]string // nil: the include directory does not exist
		want  string            // regexp; DIR is the include directory
	}{
		{"missing directory", nil, `^headers directory DIR: no such file or directory$`},
		{"missing root", map[string]string{"rdma/rdma_cma.h": ""}, `^infiniband/verbs\.h: header not found in DIR$`},
		{"syntax error", map[string]string{"infiniband/verbs.h": "int a;\nstruct ibv_x { int y = 1; };\n"},
			`^DIR/infiniband/verbs\.h:2:\d+: `},
		{"missing semicolon", map[string]string{"infiniband/verbs.h": "int a\nint b;\n"},
			`^DIR/infiniband/verbs\.h:2:\d+: `},
		// cc/v4 loops forever on this without Load's end-of-input sentinel.
		{"dangling pointer", map[string]string{"infiniband/verbs.h": "struct ibv_x { int a; };\nint *;\n"},
			`^DIR/infiniband/verbs\.h:2:\d+: `},
		{"truncated", map[string]string{"infiniband/verbs.h": "struct ibv_x { int a; };\nstruct ibv_y {\n\tint *b\n"},
			`^DIR/infiniband/verbs\.h:3: unexpected end of input`},
		{"truncated, no position from cc", map[string]string{"infiniband/verbs.h": "int a;\nstruct ibv_x { int x }"},
			`^DIR/infiniband/verbs\.h:\d+(:\d+)?: `},
		{"unterminated #if", map[string]string{"infiniband/verbs.h": "int a;\n#if 1\nint b;\n"},
			`^DIR/infiniband/verbs\.h:\d+:\d+: .*#endif`},
		{"missing include", map[string]string{"infiniband/verbs.h": "#include <infiniband/no_such_header.h>\n"},
			`^DIR/infiniband/verbs\.h:1:\d+: .*no_such_header\.h`},
		{"bit-field", map[string]string{"infiniband/verbs.h": "int a;\n\nstruct ibv_bits {\n\tunsigned a : 3;\n\tunsigned b : 5;\n};\n"},
			`^infiniband/verbs\.h:4: struct ibv_bits member a: bit-fields are not supported$`},
		// A member's error names the member's line, once.
		{"nested bit-field", map[string]string{"infiniband/verbs.h": "struct ibv_a {\n\tint x;\n\tstruct {\n\t\tint y;\n\t\tint b : 3;\n\t} in;\n};\n"},
			`^infiniband/verbs\.h:5: struct ibv_a member in \(struct \{ \.\.\. \}\) member b: bit-fields are not supported$`},
		{"bit-field in a struct in an anonymous union", map[string]string{"infiniband/verbs.h": "struct ibv_a {\n\tint x;\n\tunion {\n\t\tint y;\n\t\tstruct {\n\t\t\tint b : 3;\n\t\t} deep;\n\t};\n};\n"},
			`^infiniband/verbs\.h:6: struct ibv_a member deep \(struct \{ \.\.\. \}\) member b: bit-fields are not supported$`},
		{"member of no Go type", map[string]string{"infiniband/verbs.h": "struct ibv_c {\n\tint x;\n\t_Complex float c;\n};\n"},
			`^infiniband/verbs\.h:3: struct ibv_c member c: the C type .* has no Go equivalent$`},
		{"packed", map[string]string{"infiniband/verbs.h": "struct ibv_packed {\n\tchar c;\n\tint i;\n} __attribute__((packed));\n"},
			`^infiniband/verbs\.h:1: struct ibv_packed: __attribute__\(\(packed\)\) is not supported`},
		{"__packed__ before the tag", map[string]string{"infiniband/verbs.h": "int a;\nstruct __attribute__((__packed__)) ibv_packed {\n\tchar c;\n\tlong l;\n};\n"},
			`^infiniband/verbs\.h:2: struct ibv_packed: __attribute__\(\(packed\)\) is not supported`},
		// cc/v4 applies packed to a struct's own definition only: on a
		// member, an enum or a typedef's anonymous struct, and #pragma
		// pack, it lays the type out unpacked, where gcc packs it
		// (checked with gcc: i at 1, the enum 1 byte, the struct 9 bytes,
		// i at 1). The layout assertions would catch each, but
		// -layout-only output has none.
		{"packed member", map[string]string{"infiniband/verbs.h": "struct ibv_pm {\n\tchar c;\n\tint i __attribute__((packed));\n};\n"},
			`^infiniband/verbs\.h:3: __attribute__\(\(packed\)\) is not supported \(cc/v4 does not apply it here`},
		{"packed enum", map[string]string{"infiniband/verbs.h": "int a;\nenum ibv_pe {\n\tIBV_PE_A = 1\n} __attribute__((packed));\n"},
			`^infiniband/verbs\.h:4: __attribute__\(\(packed\)\) is not supported`},
		{"packed typedef'd anonymous struct", map[string]string{"infiniband/verbs.h": "typedef struct {\n\tchar c;\n\tlong l;\n} __attribute__((__packed__)) ibv_tp;\n"},
			`^infiniband/verbs\.h:4: __attribute__\(\(__packed__\)\) is not supported`},
		{"#pragma pack", map[string]string{"infiniband/verbs.h": "int a;\n#pragma pack(push, 1)\nstruct ibv_pp {\n\tchar c;\n\tint i;\n};\n#pragma pack(pop)\n"},
			`^infiniband/verbs\.h:2: #pragma pack is not supported \(cc/v4 ignores it`},
		{"_Pragma pack", map[string]string{"infiniband/verbs.h": "int a;\n_Pragma(\"pack(push, 1)\")\nstruct ibv_pp {\n\tchar c;\n\tint i;\n};\n_Pragma(\"pack(pop)\")\n"},
			`^infiniband/verbs\.h:2: _Pragma\("pack\.\.\."\) is not supported`},
		{"_Pragma pack from a macro", map[string]string{"infiniband/verbs.h": "#define PACK(x) _Pragma(#x)\nPACK(pack(push, 1))\nstruct ibv_pp {\n\tchar c;\n\tint i;\n};\n"},
			`^infiniband/verbs\.h: a _Pragma\("pack\.\.\."\) operator, from a macro, is not supported`},
		// A header of the directory that is not a target header.
		{"#pragma pack in an included header", map[string]string{
			"infiniband/verbs.h": "#include <util/pack.h>\nstruct ibv_pp {\n\tchar c;\n\tint i;\n};\n",
			"util/pack.h":        "int a;\n#pragma pack(push, 1)\n"},
			`^util/pack\.h:2: #pragma pack is not supported`},
		// cc/v4 does not parse an attribute between "enum" and the tag.
		{"packed before an enum's tag", map[string]string{"infiniband/verbs.h": "enum __attribute__((packed)) ibv_pe {\n\tIBV_PE_A = 1\n};\n"},
			`^DIR/infiniband/verbs\.h:1:\d+: `},
		// gcc lets a typedef lower alignment: v at 4 in a 12-byte struct,
		// which no Go struct with a uint64 field matches.
		{"typedef lowering alignment", map[string]string{"infiniband/verbs.h": "typedef unsigned long ibv_u64a4 __attribute__((aligned(4)));\nstruct ibv_ta {\n\tint x;\n\tibv_u64a4 v;\n};\n"},
			`^infiniband/verbs\.h:4: struct ibv_ta member v: its type ibv_u64a4 is aligned to 4 bytes \(an aligned attribute on a typedef lowers it\), where Go aligns it to 8: no Go layout matches$`},
		{"struct typedef lowering alignment", map[string]string{"infiniband/verbs.h": "struct ibv_s8 {\n\tunsigned long x;\n};\ntypedef struct ibv_s8 ibv_s8a4 __attribute__((aligned(4)));\nstruct ibv_t {\n\tint x;\n\tibv_s8a4 v;\n};\n"},
			`^infiniband/verbs\.h:7: struct ibv_t member v: its type ibv_s8a4 is aligned to 4 bytes .*where Go aligns it to 8`},
		{"array of a typedef lowering alignment", map[string]string{"infiniband/verbs.h": "typedef unsigned long ibv_u64a4 __attribute__((aligned(4)));\nstruct ibv_ta {\n\tint x;\n\tibv_u64a4 v[2];\n};\n"},
			`^infiniband/verbs\.h:4: struct ibv_ta member v: its type .* is aligned to 4 bytes`},
		// Go aligns nothing beyond 8 bytes: a field of 16 would be a uint128.
		{"aligned(16) struct", map[string]string{"infiniband/verbs.h": "int a;\nstruct ibv_a16 {\n\tint x;\n} __attribute__((aligned(16)));\n"},
			`^infiniband/verbs\.h:2: struct ibv_a16: aligned to 16 bytes \(by an aligned attribute or _Alignas on it or on a member\): Go aligns to at most 8$`},
		{"_Alignas(16) member", map[string]string{"infiniband/verbs.h": "struct ibv_b {\n\tint n;\n\t_Alignas(16) int x;\n};\n"},
			`^infiniband/verbs\.h:1: struct ibv_b: aligned to 16 bytes \(by an aligned attribute or _Alignas on it or on a member\): Go aligns to at most 8$`},
		{"aligned(16) member", map[string]string{"infiniband/verbs.h": "struct ibv_c {\n\tint n;\n\tint x __attribute__((aligned(16)));\n};\n"},
			`^infiniband/verbs\.h:1: struct ibv_c: aligned to 16 bytes`},
		{"member of an aligned(16) typedef", map[string]string{"infiniband/verbs.h": "typedef int ibv_i16 __attribute__((aligned(16)));\nstruct ibv_d {\n\tint n;\n\tibv_i16 x;\n};\n"},
			`^infiniband/verbs\.h:4: struct ibv_d member x: its type ibv_i16 is aligned to 16 bytes: Go aligns to at most 8$`},
		// gcc rejects these definitions; cc/v4 takes them as incomplete types.
		{"member of a forward-declared type", map[string]string{"infiniband/verbs.h": "struct ibv_y;\nstruct ibv_z {\n\tint a;\n\tstruct ibv_y y;\n};\n"},
			`^infiniband/verbs\.h:4: struct ibv_z member y: its type struct ibv_y is incomplete \(declared, never defined\)$`},
		{"flexible array not last", map[string]string{"infiniband/verbs.h": "struct ibv_x {\n\tint n;\n\tint a[];\n\tint b;\n};\n"},
			`^infiniband/verbs\.h:3: struct ibv_x member a: a flexible array member must be the last member of a struct$`},
		{"flexible array in a union", map[string]string{"infiniband/verbs.h": "union ibv_u {\n\tint n;\n\tint a[];\n};\n"},
			`^infiniband/verbs\.h:3: union ibv_u member a: a union cannot hold a flexible array member \(wrap it in a struct, as __DECLARE_FLEX_ARRAY does\)$`},
		{"flexible array in a nested union", map[string]string{"infiniband/verbs.h": "struct ibv_w {\n\tint n;\n\tunion {\n\t\tint m;\n\t\tint a[];\n\t} u;\n};\n"},
			`^infiniband/verbs\.h:5: struct ibv_w member u \(union \{ \.\.\. \}\) member a: a union cannot hold a flexible array member`},
		{"nameless member", map[string]string{"infiniband/verbs.h": "\nstruct ibv_a {\n\tint;\n\tint x;\n};\n"},
			`^infiniband/verbs\.h:2: struct ibv_a: a member of type int declares no name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dir string
			if tc.files == nil {
				dir = filepath.Join(t.TempDir(), "no-such-dir")
			} else {
				dir = includeDir(t, tc.files)
			}
			err := loadModel(dir, roots)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line:\n%s", msg)
			}
			abs, _ := filepath.Abs(dir)
			want := strings.ReplaceAll(tc.want, "DIR", regexp.QuoteMeta(abs))
			if tc.files == nil || tc.name == "missing root" {
				want = strings.ReplaceAll(tc.want, "DIR", regexp.QuoteMeta(dir))
			}
			if !regexp.MustCompile(want).MatchString(msg) {
				t.Errorf("error\n\t%s\ndoes not match\n\t%s", msg, want)
			}
		})
	}
}

// TestLoadHermetic: a header set missing one of its own headers must not
// silently use the system's copy, except rdma/ib_user_verbs.h, which comes
// from the kernel's UAPI headers (linux-libc-dev) and no rdma-core package.
func TestLoadHermetic(t *testing.T) {
	for _, h := range []string{"rdma/ib_user_verbs.h", "rdma/ib_user_sa.h"} {
		if _, err := os.Stat(filepath.Join("/usr/include", h)); err != nil {
			t.Skipf("/usr/include/%s is missing (install linux-libc-dev): cannot test a header that leaks in from the system", h)
		}
	}
	allowed := includeDir(t, map[string]string{
		"infiniband/verbs.h": "#include <rdma/ib_user_verbs.h>\nstruct ibv_x { struct ib_uverbs_sge sge; };\n",
	})
	l, err := gen.Load(allowed, []string{"infiniband/verbs.h"})
	if err != nil {
		t.Fatalf("the kernel's rdma/ib_user_verbs.h was refused: %v", err)
	}
	ir, err := gen.Model(l)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range ir.Records {
		if r.CName == "ib_uverbs_sge" && r.Pos.File == "rdma/ib_user_verbs.h" && !r.System {
			found = true
		}
	}
	if !found {
		t.Error("struct ib_uverbs_sge from the kernel's rdma/ib_user_verbs.h is not modelled as a target record")
	}

	leaky := includeDir(t, map[string]string{
		"infiniband/verbs.h": "#include <rdma/ib_user_sa.h>\nstruct ibv_x { int a; };\n",
	})
	var first string
	for i := 0; i < 3; i++ { // the message must not depend on map order
		_, err = gen.Load(leaky, []string{"infiniband/verbs.h"})
		if err == nil {
			t.Fatal("a target header from /usr/include was accepted")
		}
		if i == 0 {
			first = err.Error()
		} else if err.Error() != first {
			t.Errorf("the error changes between runs:\n\t%s\n\t%s", first, err)
		}
	}
	want := `^/usr/include/rdma/ib_user_sa\.h:\d+: declares \w+ but lies outside ` + regexp.QuoteMeta(leaky) + `: the header set is incomplete$`
	if !regexp.MustCompile(want).MatchString(first) {
		t.Errorf("error\n\t%s\ndoes not match\n\t%s", first, want)
	}
}

// TestLoadTruncatedNamesTheFile: when the input ends inside a declaration,
// the error names the header that ends there and the line of its last
// token, not the last root header.
func TestLoadTruncatedNamesTheFile(t *testing.T) {
	const truncated = "struct ibv_x { int a; };\nstruct ibv_y {\n\tint *b\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // regexp; DIR is the include directory
	}{
		{"first root", map[string]string{"infiniband/verbs.h": truncated, "rdma/rdma_cma.h": "", "rdma/rdma_verbs.h": ""},
			`^DIR/infiniband/verbs\.h:3: unexpected end of input`},
		{"middle root", map[string]string{"infiniband/verbs.h": "int a;\n", "rdma/rdma_cma.h": "/* a comment */\n" + truncated + "/* and another */\n", "rdma/rdma_verbs.h": "#ifndef X\n#define X\n#endif\n"},
			`^DIR/rdma/rdma_cma\.h:4: unexpected end of input`},
		{"included header", map[string]string{"infiniband/verbs.h": "#include <infiniband/verbs_api.h>\n", "infiniband/verbs_api.h": "#ifndef A\n#define A\n" + truncated + "#endif\n",
			"rdma/rdma_cma.h": "", "rdma/rdma_verbs.h": ""},
			`^DIR/infiniband/verbs_api\.h:5: unexpected end of input`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := includeDir(t, tc.files)
			err := loadModel(dir, gen.Roots)
			abs, _ := filepath.Abs(dir)
			want := strings.ReplaceAll(tc.want, "DIR", regexp.QuoteMeta(abs))
			if err == nil || !regexp.MustCompile(want).MatchString(err.Error()) {
				t.Errorf("error\n\t%v\ndoes not match\n\t%s", err, want)
			}
		})
	}
}
