package gen_test

import (
	"path/filepath"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// vendoredFuncs is every function of the vendored rdma-core headers (what
// generated/ is made from) with the convention gen.Conventions gives it.
func vendoredFuncs(t *testing.T) map[string]*gen.Func {
	t.Helper()
	l, err := gen.Load(filepath.Join("..", "headers", "vendored", "include"), gen.Roots)
	if err != nil {
		t.Fatal(err)
	}
	ir, err := gen.Model(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.Names(ir, gen.Packages()); err != nil {
		t.Fatal(err)
	}
	if err := gen.AssignConventions(ir, gen.Conventions); err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*gen.Func{}
	for _, f := range ir.Funcs {
		funcs[f.Name] = f
	}
	return funcs
}

// TestConventionsOfMixedReturns pins the functions whose failures mix
// errnos returned, errno set and codes of their own, as rdma-core's
// sources have them: a rule moved or reordered in gen.Conventions must
// not give them another reading of their result.
func TestConventionsOfMixedReturns(t *testing.T) {
	funcs := vendoredFuncs(t)
	for _, c := range []struct {
		name string
		want gen.Convention
		why  string
	}{
		{"ibv_resolve_eth_l2_from_gid", gen.MinusOneErrno,
			"-1 with errno (its ibv_query_gid), or -errno: -1 must read errno"},
	} {
		f := funcs[c.name]
		if f == nil {
			t.Errorf("%s is not in the vendored headers", c.name)
			continue
		}
		if f.Convention != c.want {
			t.Errorf("%s: convention %q (rule %q), want %q: %s", c.name, f.Convention, f.ConventionRule, c.want, c.why)
		}
	}
}
