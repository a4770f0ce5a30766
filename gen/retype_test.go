package gen_test

import (
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/gen"
	"github.com/stretchr/testify/require"
)

// retypeHeaders are the headers of the Retypes and NoRDMA unit tests: one
// package's worth of flags in every shape an entry can meet, and a second
// header for a second package.
var retypeHeaders = map[string]string{
	"infiniband/verbs.h": `#include <stdint.h>
#include <infiniband/extra.h>
enum ibv_access_flags { IBV_ACCESS_LOCAL_WRITE = 1, IBV_ACCESS_REMOTE_WRITE = 2 };
enum ibv_send_flags { IBV_SEND_SIGNALED = 2 };
struct ibv_caps { uint32_t flags; };
struct ibv_wr {
	uint64_t wide_flags;
	unsigned int send_flags;
	int access;
	int *ptr;
	struct { uint32_t inner; } nested;
	struct ibv_caps caps;
};
struct ibv_pd;
struct ibv_pd *ibv_open_pd(int flags);
int ibv_reg(int access, int *mask);
unsigned int ibv_read_flags(void);
`,
	"infiniband/extra.h": `enum ibv_extra_flags { IBV_EXTRA_ONE = 1 };
`,
}

// retypeSpecs are two packages over retypeHeaders, verbs first, with the
// Retypes and NoRDMA entries given to verbs.
func retypeSpecs(retypes map[string]gen.Retype, noRDMA map[string]gen.NoRDMA) []gen.PackageSpec {
	prefixes := []gen.Prefix{{C: "ibv_", Go: ""}, {C: "IBV_", Go: ""}}
	return []gen.PackageSpec{
		{Name: "verbs", Headers: []string{"infiniband/verbs.h"}, Includes: []string{"infiniband/verbs.h"},
			Prefixes: prefixes, Retypes: retypes, NoRDMA: noRDMA},
		{Name: "extra", Headers: []string{"infiniband/extra.h"}, Includes: []string{"infiniband/extra.h"},
			Prefixes: prefixes},
	}
}

// retypeNames models retypeHeaders and runs Names with specs.
func retypeNames(t *testing.T, specs []gen.PackageSpec) (*gen.IR, error) {
	t.Helper()
	ir := modelOf(t, includeDir(t, retypeHeaders), []string{"infiniband/verbs.h"})
	return ir, gen.Names(ir, specs)
}

func TestRetypeApplies(t *testing.T) {
	specs := retypeSpecs(map[string]gen.Retype{
		"ibv_reg.access":                {Enum: "ibv_access_flags", Reason: "a parameter"},
		"ibv_reg.mask":                  {Enum: "ibv_access_flags", Reason: "a pointer parameter"},
		"ibv_read_flags.return":         {Enum: "ibv_send_flags", Reason: "a result"},
		"ibv_wr.send_flags":             {Enum: "ibv_send_flags", Reason: "an unsigned member"},
		"ibv_wr.access":                 {Enum: "ibv_access_flags", Reason: "an int member, an unsigned enum"},
		"ibv_wr.nested.inner":           {Enum: "ibv_send_flags", Reason: "a member of a struct defined inside"},
		"ibv_caps.flags":                {Enum: "ibv_send_flags", Reason: "a member of a record of its own"},
		"ibv_open_pd.flags":             {Enum: "ibv_access_flags", Reason: "the NoRDMA function's own"},
		"ibv_wr.nested.no_such_member":  {Enum: "ibv_send_flags", Reason: "stale"},
		"ibv_no_such_function.argument": {Enum: "ibv_send_flags", Reason: "stale"},
		"ibv_reg.no_such_parameter":     {Enum: "ibv_send_flags", Reason: "stale"},
		"ibv_wr.send_flags_x":           {Enum: "ibv_no_such_enum", Reason: "stale twice"},
		"ibv_wr.wide_flags":             {Enum: "ibv_no_such_enum", Reason: "an unknown enum: stale, whatever the sizes"},
	}, map[string]gen.NoRDMA{
		"ibv_open_pd":      {Errno: syscall.ENOSYS, Says: "no kernel support", Reason: "test"},
		"ibv_no_such_func": {Errno: syscall.ENODEV, Says: "stale", Reason: "test"},
	})
	ir, err := retypeNames(t, specs)
	if err != nil {
		t.Fatal(err)
	}
	wantStale := []string{
		"verbs: no-RDMA ibv_no_such_func",
		"verbs: retype ibv_no_such_function.argument",
		"verbs: retype ibv_reg.no_such_parameter",
		"verbs: retype ibv_wr.nested.no_such_member",
		"verbs: retype ibv_wr.send_flags_x (no enum ibv_no_such_enum in these headers)",
		"verbs: retype ibv_wr.wide_flags (no enum ibv_no_such_enum in these headers)",
	}
	if !slices.Equal(ir.StalePatches, wantStale) {
		t.Errorf("stale patches:\n%s\nwant:\n%s", strings.Join(ir.StalePatches, "\n"), strings.Join(wantStale, "\n"))
	}
	funcs := map[string]*gen.Func{}
	for _, f := range ir.Funcs {
		funcs[f.Name] = f
	}
	reg := funcs["ibv_reg"]
	if e := reg.Params[0].Type.GoEnum; e == nil || e.CName != "ibv_access_flags" {
		t.Errorf("ibv_reg's access: GoEnum %v", e)
	}
	if ty := reg.Params[0].Type; ty.CBase != "int" || !ty.Signed || ty.Size != 4 {
		t.Errorf("ibv_reg's access lost its C type: %+v", ty)
	}
	if mask := reg.Params[1].Type; mask.GoEnum != nil || mask.Elem.GoEnum == nil || mask.Elem.CBase != "int" {
		t.Errorf("ibv_reg's mask: want a pointer to an int carrying the enum, got %+v -> %+v", mask, mask.Elem)
	}
	if e := funcs["ibv_read_flags"].Result.GoEnum; e == nil || e.CName != "ibv_send_flags" {
		t.Errorf("ibv_read_flags' result: GoEnum %v", e)
	}
	if nr := funcs["ibv_open_pd"].NoRDMA; nr == nil || nr.Errno != syscall.ENOSYS {
		t.Errorf("ibv_open_pd: NoRDMA %+v", nr)
	}
	if funcs["ibv_reg"].NoRDMA != nil {
		t.Error("ibv_reg got a NoRDMA entry it has none of")
	}

	// What the Go side says of it: the stub takes the enum's type and
	// converts to the C type; the fields have the enum's type; the layout
	// test compares the enum's sign for a retyped member.
	if err := gen.AssignConventions(ir, []gen.ConventionRule{
		{Name: "test", Convention: gen.MinusOneErrno, Funcs: []string{"ibv_reg"}},
		{Name: "test values", Convention: gen.CannotFail, Funcs: []string{"ibv_read_flags"}},
		{Name: "test constructors", Convention: gen.NullErrno, Funcs: []string{"ibv_open_pd"}},
	}); err != nil {
		t.Fatal(err)
	}
	files, err := gen.Emit(ir, specs, gen.EmitOptions{Command: "test", ImportRoot: "example.com/x", LayoutPkg: "example.com/x/layout"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[f.Path] = string(f.Data)
	}
	for file, want := range map[string][]string{
		"verbs/zverbs_funcs.go": {
			"func Reg(access AccessFlags, mask *AccessFlags) error",
			"C.ibv_reg(C.int(access), (*C.int)(unsafe.Pointer(mask)))",
			"func ReadFlags() SendFlags",
			"return SendFlags(r)",
			`verberr.NewSite("ibv_open_pd", nil).NoRDMA(syscall.ENOSYS, "no kernel support")`,
			`Its ENOSYS, when the loaded library has the function, means "no kernel support": the error then also matches verberr.ErrNoRDMA.`,
		},
		"verbs/zverbs_types.go": {
			"SendFlags SendFlags // send_flags @8",
			"Access AccessFlags // access @12",
			"Inner SendFlags // inner @0",
			"Flags SendFlags // flags @0",
			"WideFlags uint64",
		},
		"layout/zlayout_rows.h": {
			`{"membersigned(struct ibv_wr, access as enum ibv_access_flags)", (unsigned long long)((enum ibv_access_flags)-1 < 0)}`,
			`{"membersize(struct ibv_wr, access)", (unsigned long long)(sizeof(((struct ibv_wr *)0)->access))}`,
		},
	} {
		// Compared word by word, comment markers and line breaks aside.
		words := func(s string) string { return strings.Join(strings.Fields(strings.ReplaceAll(s, "//", "")), " ") }
		text := words(out[file])
		for _, w := range want {
			if !strings.Contains(text, words(w)) {
				t.Errorf("%s lacks %q", file, w)
			}
		}
	}
	// The static assertion still checks the member's own C sign.
	if !strings.Contains(out["verbs/zverbs_funcs.go"], "((__typeof__(((struct ibv_wr *)0)->access))-1 < 0) == 1") {
		t.Error("the layout assertion of ibv_wr.access no longer checks its C sign (signed int)")
	}
}

// Each entry that cannot apply fails generation, naming the entry and
// where its target is declared.
func TestRetypeFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retypes map[string]gen.Retype
		noRDMA  map[string]gen.NoRDMA
		want    []string
	}{
		{"size mismatch", map[string]gen.Retype{"ibv_wr.wide_flags": {Enum: "ibv_access_flags"}},
			nil, []string{"infiniband/verbs.h:7:", `retype "ibv_wr.wide_flags" of package verbs`,
				"member wide_flags of struct ibv_wr is uint64_t, 8 bytes, and enum ibv_access_flags is 4: the Go type must have the C type's size"}},
		{"not an integer", map[string]gen.Retype{"ibv_wr.ptr": {Enum: "ibv_access_flags"}},
			nil, []string{`retype "ibv_wr.ptr"`, "member ptr of struct ibv_wr is int *, not an integer"}},
		{"a pointer member", map[string]gen.Retype{"ibv_wr.caps": {Enum: "ibv_access_flags"}},
			nil, []string{`retype "ibv_wr.caps"`, "is struct ibv_caps, not an integer"}},
		{"a record of its own", map[string]gen.Retype{"ibv_wr.caps.flags": {Enum: "ibv_access_flags"}},
			nil, []string{`retype "ibv_wr.caps.flags"`, "member caps is struct ibv_caps, declared on its own: retype ibv_caps.flags instead"}},
		{"a later package's enum", map[string]gen.Retype{"ibv_reg.access": {Enum: "ibv_extra_flags"}},
			nil, []string{`retype "ibv_reg.access"`, "enum ibv_extra_flags is package extra's, which package verbs does not import"}},
		{"no member path", map[string]gen.Retype{"ibv_reg": {Enum: "ibv_access_flags"}},
			nil, []string{`retype "ibv_reg" of package verbs: the key is not FUNCTION.PARAMETER, FUNCTION.return or RECORD.MEMBER`}},
		{"an errno without a name", nil, map[string]gen.NoRDMA{"ibv_open_pd": {Errno: syscall.E2BIG, Says: "x"}},
			[]string{`NoRDMA entry "ibv_open_pd" of package verbs: errno 7 has no name here`}},
		{"nothing to say", nil, map[string]gen.NoRDMA{"ibv_open_pd": {Errno: syscall.ENOSYS}},
			[]string{`NoRDMA entry "ibv_open_pd" of package verbs: Says is empty`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := retypeNames(t, retypeSpecs(tc.retypes, tc.noRDMA))
			if err == nil {
				t.Fatal("Names accepted the entry")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A NoRDMA entry on a function that cannot fail has no error to mark.
func TestNoRDMACannotFail(t *testing.T) {
	specs := retypeSpecs(nil, map[string]gen.NoRDMA{"ibv_read_flags": {Errno: syscall.ENOSYS, Says: "x"}})
	ir, err := retypeNames(t, specs)
	if err != nil {
		t.Fatal(err)
	}
	err = gen.AssignConventions(ir, []gen.ConventionRule{{Name: "all", Convention: gen.CannotFail, Funcs: []string{"*"}}})
	if err == nil || !strings.Contains(err.Error(), `ibv_read_flags has a NoRDMA entry, but cannot fail (error convention "cannot fail", rule "all")`) {
		t.Fatalf("AssignConventions: %v", err)
	}
}

// Verify reads a plain C integer that the committed packages spell with an
// enum's type (a Retypes entry) by its size: its sign is the enum's.
// Neither a retyped int nor a sign the headers change under a retyped
// integer, nor a release whose headers lack the entry's enum (the integer
// is then plain, as in 44.0, which has ibv_query_qp_data_in_order but not
// its enums), is a difference; a member that is not retyped still is.
func TestVerifyRetyped(t *testing.T) {
	b, a := verifyCommitted(t, vendoredWith(t,
		// ibv_query_qp_data_in_order's result loses its enum.
		"enum ibv_query_qp_data_in_order_caps {\n\tIBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG = 1 << 0,\n\tIBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES = 1 << 1,\n};\n", "",
		// A retyped parameter and a retyped member change sign.
		"struct ibv_qp_attr *attr,\n\t\t  int attr_mask);\n\n/**\n * ibv_modify_qp_rate_limit", "struct ibv_qp_attr *attr,\n\t\t  unsigned int attr_mask);\n\n/**\n * ibv_modify_qp_rate_limit",
		"\tenum ibv_wr_opcode\topcode;\n\tunsigned int\t\tsend_flags;", "\tenum ibv_wr_opcode\topcode;\n\tint\t\t\tsend_flags;",
	))
	require.Empty(t, b, "breaking")
	require.Empty(t, a, "additions")

	b, _ = verifyCommitted(t, vendoredWith(t, "\tuint32_t\t\tvendor_err;", "\tint32_t\t\tvendor_err;"))
	require.Equal(t, []string{"struct ibv_wc member vendor_err: type: C int32, Go uint32"}, b)
}
