package gen_test

import (
	"os"
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

// vendoredWith copies headers/vendored/include to a temporary directory,
// applies edits (old -> new, each of which must match exactly once) to its
// infiniband/verbs.h, and returns the copy.
func vendoredWith(t *testing.T, edits ...string) string {
	t.Helper()
	return vendoredEdited(t, "infiniband/verbs.h", edits...)
}

// vendoredEdited is vendoredWith for header file (relative to the include
// directory).
func vendoredEdited(t *testing.T, file string, edits ...string) string {
	t.Helper()
	src := filepath.Join("..", "headers", "vendored", "include")
	dst := filepath.Join(t.TempDir(), "include")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	verbs := filepath.Join(dst, filepath.FromSlash(file))
	b, err := os.ReadFile(verbs)
	require.NoError(t, err)
	text := string(b)
	require.Zero(t, len(edits)%2, "edits come in pairs")
	for i := 0; i < len(edits); i += 2 {
		require.Equal(t, 1, strings.Count(text, edits[i]), "edit %q must match once in %s", edits[i], file)
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	require.NoError(t, os.WriteFile(verbs, []byte(text), 0o644))
	return dst
}

// Header edits that only add to rdma-core 65.0, as a vendor's headers do.
var vendorAdditions = []string{
	"\tIBV_ACCESS_RELAXED_ORDERING\t= IBV_ACCESS_OPTIONAL_FIRST,\n",
	"\tIBV_ACCESS_RELAXED_ORDERING\t= IBV_ACCESS_OPTIONAL_FIRST,\n\tIBV_ACCESS_MY_VENDOR = (1 << 30),\n",
	"\tuint32_t phys_port_cnt_ex;\n",
	"\tuint32_t phys_port_cnt_ex;\n\tuint64_t my_new;\n",
	"int ibv_query_port_speed(",
	"struct ibv_my_vendor_attr {\n\tuint32_t flags;\n\tuint64_t handle;\n};\n\nint ibv_my_vendor_op(struct ibv_context *ctx, uint32_t flags);\n\nint ibv_query_port_speed(",
}

// verifyCommitted verifies goverbs' committed packages (generated from the
// vendored headers) against headers, and returns the mismatches by class.
func verifyCommitted(t *testing.T, headers string) (breaking, additions []string) {
	t.Helper()
	const importRoot = "github.com/goverbs/goverbs/generated"
	res, err := gen.Build(gen.Config{Headers: headers, ImportRoot: importRoot, LayoutOnly: true})
	require.NoError(t, err)
	ms, err := gen.Verify(res.IR, gen.Packages(), filepath.Join("..", "generated"), importRoot, "")
	require.NoError(t, err)
	for _, m := range ms {
		if m.Class == gen.Addition {
			additions = append(additions, m.String())
		} else {
			breaking = append(breaking, m.String())
		}
	}
	return breaking, additions
}

// TestVerifyClasses verifies the committed packages against copies of the
// vendored headers they were generated from: unchanged, with additions
// only, and with each kind of breaking change, which must be named.
func TestVerifyClasses(t *testing.T) {
	t.Run("unchanged", func(t *testing.T) {
		b, a := verifyCommitted(t, vendoredWith(t))
		require.Empty(t, b)
		require.Empty(t, a)
	})
	t.Run("additions", func(t *testing.T) {
		b, a := verifyCommitted(t, vendoredWith(t, vendorAdditions...))
		require.Empty(t, b)
		require.Equal(t, []string{
			"enum ibv_access_flags enumerator IBV_ACCESS_MY_VENDOR: value: C 1073741824, Go missing",
			"function ibv_my_vendor_op: prototype: C int32(pointer, uint32), Go missing",
			"struct ibv_device_attr_ex member my_new: offset: C 400, Go missing",
			"struct ibv_device_attr_ex: size: C 408, Go 400",
			"struct ibv_my_vendor_attr: size: C 16, Go missing",
		}, a)
	})
	t.Run("member in padding", func(t *testing.T) {
		b, a := verifyCommitted(t, vendoredWith(t, "\tuint16_t\t\tport_cap_flags2;\n", "\tuint16_t\t\tport_cap_flags2;\n\tuint16_t\t\tmy_pad;\n"))
		require.Empty(t, b)
		require.Equal(t, []string{"struct ibv_port_attr member my_pad: offset: C 50, Go missing"}, a)
	})
	const reserved = "\t__u16 port_cap_flags2;\n\t__u8  reserved[2];\n"
	t.Run("reserved space shortened", func(t *testing.T) {
		b, a := verifyCommitted(t, vendoredEdited(t, "infiniband/ib_user_ioctl_verbs.h", reserved, "\t__u16 port_cap_flags2;\n\t__u8  my_flag;\n\t__u8  reserved[1];\n"))
		require.Empty(t, b)
		require.Equal(t, []string{
			"struct ib_uverbs_query_port_resp_ex member my_flag: offset: C 42, Go missing",
			"struct ib_uverbs_query_port_resp_ex member reserved: offset: C 43, Go 42",
		}, a)
	})
	t.Run("reserved space replaced", func(t *testing.T) {
		b, a := verifyCommitted(t, vendoredEdited(t, "infiniband/ib_user_ioctl_verbs.h", reserved, "\t__u16 port_cap_flags2;\n\t__u16 my_flags;\n"))
		require.Empty(t, b)
		require.Equal(t, []string{
			"struct ib_uverbs_query_port_resp_ex member my_flags: offset: C 42, Go missing",
			"struct ib_uverbs_query_port_resp_ex member reserved: offset: C missing, Go 42",
		}, a)
	})
	t.Run("enumerator value changed", func(t *testing.T) {
		b, _ := verifyCommitted(t, vendoredWith(t, "IBV_ACCESS_HUGETLB\t\t= (1<<7),", "IBV_ACCESS_HUGETLB\t\t= (1<<11),"))
		require.Equal(t, []string{"enum ibv_access_flags enumerator IBV_ACCESS_HUGETLB: value: C 2048, Go 128"}, b)
	})
	t.Run("members swapped", func(t *testing.T) {
		b, _ := verifyCommitted(t, vendoredWith(t, "\tuint16_t\t\tlid;\n\tuint16_t\t\tsm_lid;\n", "\tuint16_t\t\tsm_lid;\n\tuint16_t\t\tlid;\n"))
		require.Equal(t, []string{
			"struct ibv_port_attr member lid: offset: C 36, Go 34",
			"struct ibv_port_attr member sm_lid: offset: C 34, Go 36",
		}, b)
	})
	t.Run("member inserted in the middle", func(t *testing.T) {
		b, _ := verifyCommitted(t, vendoredWith(t, "\tuint16_t\t\tlid;\n", "\tuint16_t\t\tlid;\n\tuint16_t\t\tmy_mid;\n"))
		require.Contains(t, b, "struct ibv_port_attr member my_mid: offset: C 36, Go missing")
		require.Contains(t, b, "struct ibv_port_attr member sm_lid: offset: C 38, Go 36")
	})
	t.Run("member retyped", func(t *testing.T) {
		b, a := verifyCommitted(t, vendoredWith(t, "\tuint32_t\t\tmax_msg_sz;\n", "\tint32_t\t\tmax_msg_sz;\n"))
		require.Equal(t, []string{"struct ibv_port_attr member max_msg_sz: type: C int32, Go uint32"}, b)
		require.Empty(t, a)
	})
	t.Run("parameter retyped", func(t *testing.T) {
		b, a := verifyCommitted(t, vendoredWith(t,
			"int ibv_query_port_speed(struct ibv_context *context, uint32_t port_num,",
			"int ibv_query_port_speed(struct ibv_context *context, uint64_t port_num,"))
		require.Equal(t, []string{"function ibv_query_port_speed parameter 2 (port_num): C uint64, Go uint32"}, b)
		require.Empty(t, a)
	})
	t.Run("static inline parameter retyped", func(t *testing.T) {
		b, _ := verifyCommitted(t, vendoredWith(t,
			"static inline int ibv_req_notify_cq(struct ibv_cq *cq, int solicited_only)",
			"static inline int ibv_req_notify_cq(struct ibv_cq *cq, unsigned int solicited_only)"))
		require.Equal(t, []string{"function ibv_req_notify_cq parameter 2 (solicited_only): C uint32, Go int32"}, b)
	})
	t.Run("result retyped", func(t *testing.T) {
		b, _ := verifyCommitted(t, vendoredWith(t,
			"int ibv_query_port_speed(struct ibv_context *context,",
			"long ibv_query_port_speed(struct ibv_context *context,"))
		require.Equal(t, []string{"function ibv_query_port_speed: result: C int64, Go int32"}, b)
	})
	t.Run("function removed beside an addition", func(t *testing.T) {
		b, a := verifyCommitted(t, vendoredWith(t,
			"int ibv_query_port_speed(struct ibv_context *context, uint32_t port_num,\n\t\t\t uint64_t *port_speed);\n", "",
			"\tuint32_t phys_port_cnt_ex;\n", "\tuint32_t phys_port_cnt_ex;\n\tuint64_t my_new;\n"))
		require.Equal(t, []string{"function ibv_query_port_speed: prototype: C missing, Go int32(pointer, uint32, pointer)"}, b)
		require.Len(t, a, 2)
	})
}

// TestVerifyOlderRelease verifies the committed packages (rdma-core 65.0)
// against an older pinned release: the packages grew since, at records'
// ends, in verbs_context's front, and by new functions, so every
// difference is an addition.
func TestVerifyOlderRelease(t *testing.T) {
	b, a := verifyCommitted(t, pinnedHeaders(t, "56.1"))
	require.Empty(t, b)
	require.Contains(t, a, "struct verbs_context: size: C 648, Go 696")
	require.Contains(t, a, "function ibv_reg_mr_ex: prototype: C missing, Go pointer(pointer, pointer)")
}
