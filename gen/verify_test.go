package gen_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
	"github.com/stretchr/testify/require"
)

// TestVerifyNamesEveryDifference generates packages from one header set and
// verifies them against another that keeps every layout but changes what
// offsets cannot show: a member's and a union member's sign, an enum's sign
// (and with it a member of that enum type), an enumerator's value, a
// macro's value and a macro's type, and adds an enumerator and a macro.
// verify must name each, and nothing when the headers are the same.
func TestVerifyNamesEveryDifference(t *testing.T) {
	const before = `enum ibv_color { IBV_RED = 1, IBV_BLUE = 2 };
enum { IBV_ANON_A = 4 };
#define IBV_MAGIC 0x10
#define IBV_NEG (-3)
struct ibv_thing {
	unsigned int a;
	int b;
	union { unsigned long long u; int s; };
	enum ibv_color c;
	int tail[];
};
`
	after := strings.NewReplacer(
		"IBV_RED = 1", "IBV_RED = 3",
		"IBV_BLUE = 2", "IBV_BLUE = 2, IBV_GREEN = 5, IBV_NONE = -1",
		"int b;", "unsigned int b;",
		"int s;", "unsigned int s;",
		"int tail[]", "unsigned int tail[]",
		"0x10", "0x11",
		"(-3)", "3u\n#define IBV_NEW 7",
	).Replace(before)
	tree := func(verbs string) string {
		return includeDir(t, map[string]string{"infiniband/verbs.h": verbs, "rdma/rdma_cma.h": "", "rdma/rdma_verbs.h": ""})
	}
	const importRoot = "example.com/generated"
	out := filepath.Join(t.TempDir(), "generated")
	_, err := gen.Run(gen.Config{Headers: tree(before), Out: out, ImportRoot: importRoot, LayoutOnly: true, Version: "1.0", Command: "verbsgen (gen test)"})
	require.NoError(t, err)

	verify := func(headers string) []string { return verifyLines(t, headers, nil, out, importRoot) }
	require.Empty(t, verify(tree(before)), "the headers the packages were generated from")
	require.Equal(t, []string{
		"enum ibv_color enumerator IBV_BLUE: type: C int32, Go uint32",
		"enum ibv_color enumerator IBV_GREEN: value: C 5, Go missing",
		"enum ibv_color enumerator IBV_NONE: value: C -1, Go missing",
		"enum ibv_color enumerator IBV_RED: type: C int32, Go uint32",
		"enum ibv_color enumerator IBV_RED: value: C 3, Go 1",
		"enum ibv_color: type: C int32, Go uint32",
		"macro IBV_MAGIC: value: C 17, Go 16",
		"macro IBV_NEG: type: C uint32, Go int32",
		"macro IBV_NEG: value: C 3, Go -3",
		"macro IBV_NEW: value: C 7, Go missing",
		"struct ibv_thing member b: type: C uint32, Go int32",
		"struct ibv_thing member c: type: C int32, Go uint32",
		"struct ibv_thing member s: type: C uint32, Go int32",
		"struct ibv_thing member tail: type: C uint32, Go int32",
	}, verify(tree(after)))
}

// TestVerifyTarget verifies arm64 layouts from any host: packages laid out
// for both architectures match arm64's headers, and packages laid out for
// amd64 only are named where glibc's mutex (40 bytes on amd64, 48 on arm64)
// makes arm64 differ.
func TestVerifyTarget(t *testing.T) {
	ts, err := gen.ParseTargets("linux/amd64,linux/arm64")
	require.NoError(t, err)
	needCompilers(t, ts)
	const header = "#include <pthread.h>\nstruct ibv_locked {\n\tint n;\n\tpthread_mutex_t mutex;\n\tint after;\n};\n"
	dir := includeDir(t, map[string]string{"infiniband/verbs.h": header, "rdma/rdma_cma.h": "", "rdma/rdma_verbs.h": ""})
	const importRoot = "example.com/generated"
	verifyArm64 := func(targets []gen.Target) []string {
		out := filepath.Join(t.TempDir(), "generated")
		_, err := gen.Run(gen.Config{Headers: dir, Out: out, ImportRoot: importRoot, LayoutOnly: true, Version: "1.0", Command: "verbsgen (gen test)", Targets: targets})
		require.NoError(t, err)
		return verifyLines(t, dir, ts[1:], out, importRoot)
	}
	require.Empty(t, verifyArm64(ts), "packages laid out for both")
	require.Equal(t, []string{
		"pthread_mutex_t: size: C 48, Go 40",
		"struct ibv_locked member after: offset: C 56, Go 48",
		"struct ibv_locked: size: C 64, Go 56",
	}, verifyArm64(ts[:1]), "packages laid out for amd64 only")
}

// verifyLines verifies the packages in out (imported as importRoot) against
// headers laid out for target (the host's if nil), as lines.
func verifyLines(t *testing.T, headers string, target []gen.Target, out, importRoot string) []string {
	t.Helper()
	res, err := gen.Build(gen.Config{Headers: headers, ImportRoot: importRoot, LayoutOnly: true, Version: "1.1", Targets: target})
	require.NoError(t, err)
	goarch := ""
	if len(target) > 0 {
		goarch = target[0].GOARCH
	}
	ms, err := gen.Verify(res.IR, gen.Packages(), out, importRoot, goarch)
	require.NoError(t, err)
	var lines []string
	for _, m := range ms {
		lines = append(lines, m.String())
	}
	return lines
}
