package gen_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goverbs/goverbs/gen"
)

// FuzzLoad feeds arbitrary text as infiniband/verbs.h through every stage
// but Write: errors are expected, a panic escaping any stage is a bug (cc/v4
// panics on some malformed input; the generator must turn that into an
// error naming the header). CI runs it for a bounded time:
//
//	go test ./gen -run '^$' -fuzz FuzzLoad -fuzztime 20s
//
// Without -fuzz, go test runs just the seeds below and testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	for _, name := range goldenCases {
		data, err := os.ReadFile(filepath.Join("testdata", name, "include", "infiniband", "verbs.h"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	for _, s := range []string{
		"",
		"struct ibv_a { int x; };",
		"struct ibv_a { int x }", // syntax error
		"struct ibv_b { unsigned a : 3; unsigned b : 5; };", // bit-field
		"struct ibv_p { char c; int i; } __attribute__((packed));",
		"union ibv_u { struct { int a; }; long b; char c[3]; };",
		"struct ibv_f { short n; long long d[]; };",
		"enum ibv_e { IBV_E_A = -1, IBV_E_B = 1ULL << 40 };",
		"#define IBV_M (1ULL << 34)\n#define IBV_P ((void *)-1)\n#define IBV_S \"s\"\n",
		"int ibv_f(int a);\n#define ibv_g(a) ibv_f(a)\n#define ibv_h(t, m) offsetof(t, m)\n",
		"static inline int ibv_i(int *p) { return *p; }",
		"#include <pthread.h>\nstruct ibv_l { pthread_mutex_t m; };",
		"#if\n",
		"#define ibv_x ibv_x\nstruct ibv_x;",
		"struct ibv_r { struct ibv_r r; };",
		"typedef struct { int a; } ibv_t; void ibv_v(ibv_t t);",
		// Found by this fuzzer: cc/v4 looped forever, allocating, on input
		// ending inside a pointer declarator; a nameless int member made
		// Emit dereference nil.
		"int *;",
		"struct ibv_b { unsigned a : 3; unsigned b : 5; }^",
		"struct A0{;A};",
		// cc/v4 scanned past the end for ever: a character constant left
		// open on a last line that a backslash continues.
		"x 'a\\",
		// cc/v4 ended its input at the #include it could not find, inside
		// the pointer declarator before it, and its parser spun.
		"*\n#include<tddef.h>",
	} {
		f.Add(s)
	}
	specs := []gen.PackageSpec{{
		Name:     "verbs",
		Headers:  []string{"infiniband/verbs.h"},
		Includes: []string{"infiniband/verbs.h"},
		Prefixes: []gen.Prefix{{C: "ibv_", Go: ""}, {C: "IBV_", Go: ""}},
	}}
	f.Fuzz(func(t *testing.T, header string) {
		// No input is skipped: Load itself refuses what cc/v4 would spin
		// on (screenHeaders: a #define with unbalanced parentheses, a file
		// ending in a line continuation; and an #include cc/v4 cannot
		// follow, found by preprocessing first), so the fuzzer may find
		// what gets past those.
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "infiniband"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "infiniband", "verbs.h"), []byte(header), 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			l, err := gen.Load(dir, []string{"infiniband/verbs.h"})
			if err != nil {
				return
			}
			ir, err := gen.Model(l)
			if err != nil {
				return
			}
			if err := gen.Names(ir, specs); err != nil {
				return
			}
			// Any function the mutated header declares: the stage fails
			// only on a rule that does not fit, and CannotFail fits all.
			if err := gen.AssignConventions(ir, []gen.ConventionRule{{Name: "fuzz", Convention: gen.CannotFail, Funcs: []string{"*"}}}); err != nil {
				return
			}
			_, _ = gen.Emit(ir, specs, gen.EmitOptions{
				Command: "fuzz", ImportRoot: "example.com/fuzz", LayoutPkg: "example.com/fuzz/layout",
			})
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("the generator did not return within 10 s on this header:\n%s", header)
		}
	})
}
