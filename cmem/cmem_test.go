package cmem_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/cmem"
)

type record struct {
	A uint64
	B uint32
	C [13]byte
}

func TestNewZeroedAndFree(t *testing.T) {
	// Dirty freed chunks of the size asked for, so that a New that did not
	// zero would hand one back with the marks still in it.
	for range 8 {
		p := cmem.New[record]()
		*p = record{A: ^uint64(0), B: ^uint32(0), C: [13]byte{1, 2, 3}}
		cmem.Free(p)
	}
	for range 8 {
		p := cmem.New[record]()
		require.Equal(t, record{}, *p)
		p.A, p.B, p.C[12] = 7, 8, 9
		require.Equal(t, record{A: 7, B: 8, C: [13]byte{12: 9}}, *p)
		defer cmem.Free(p)
	}
	cmem.Free[record](nil) // a no-op
}

func TestNewSlice(t *testing.T) {
	for range 4 {
		s := cmem.NewSlice[uint64](100)
		for i := range s {
			s[i] = ^uint64(0)
		}
		cmem.FreeSlice(s)
	}
	s := cmem.NewSlice[uint64](100)
	defer cmem.FreeSlice(s)
	require.Len(t, s, 100)
	require.Equal(t, 100, cap(s))
	require.Equal(t, make([]uint64, 100), s)

	require.Nil(t, cmem.NewSlice[record](0))
	cmem.FreeSlice[record](nil)               // a no-op
	cmem.FreeSlice(s[:0:0])                   // a no-op: nothing of the allocation is reachable
	cmem.FreeSlice(cmem.NewSlice[int](3)[:1]) // a reslice frees the whole allocation

	z := cmem.NewSlice[struct{}](5) // zero-size elements: a valid slice all the same
	require.Len(t, z, 5)
	cmem.FreeSlice(z)
	cmem.Free(cmem.New[struct{}]())
}

func TestNewSliceBadLength(t *testing.T) {
	require.PanicsWithValue(t, "cmem.NewSlice[int32](-1): negative length",
		func() { cmem.NewSlice[int32](-1) })
	require.PanicsWithValue(t,
		"cmem.NewSlice[[1048576]uint8](1125899906842624): 1125899906842624 elements of 1048576 bytes overflow the address space",
		func() { cmem.NewSlice[[1 << 20]byte](1 << 50) }) // 2^70 bytes: the product overflows 64 bits
	require.PanicsWithValue(t,
		"cmem.NewSlice[uint32](2305843009213693952): 2305843009213693952 elements of 4 bytes overflow the address space",
		func() { cmem.NewSlice[uint32](1 << 61) }) // 2^63 bytes: fits in 64 bits, not in an int
	require.PanicsWithValue(t, "cmem.NewSlice[uint8](4611686018427387904): calloc of 4611686018427387904 bytes: out of memory",
		func() { cmem.NewSlice[byte](1 << 62) }) // more than any address space: calloc returns NULL
}

// calloc's alignment is what makes New right for every generated record:
// each must need no more than 16 bytes in C. The generated type files state
// every record's C alignment in its doc comment ("Size 48, align 8."): a
// record that came to need more (a header member with aligned(64)) fails
// here, and New would have to use aligned_alloc for it.
func TestGeneratedRecordsFitCallocAlignment(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "generated", "*", "z*_types*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	re := regexp.MustCompile(`(?m)^// (\w+) mirrors .*\. Size \d+, align (\d+)\.`)
	records := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			align, err := strconv.Atoi(m[2])
			require.NoError(t, err)
			require.LessOrEqual(t, align, 16, "%s: %s needs %d-byte alignment, more than calloc's 16", f, m[1], align)
			records++
		}
	}
	require.Greater(t, records, 200, "the pattern no longer matches the generated doc comments")

	for _, n := range []int{1, 3, 16, 17, 100, 4096} {
		s := cmem.NewSlice[byte](n)
		require.Zero(t, cmem.Addr(s)%16, "calloc(%d) is not 16-byte aligned", n)
		cmem.FreeSlice(s)
	}
}

func TestNoAllocs(t *testing.T) {
	noAllocs := func(name string, f func()) {
		t.Helper()
		f()
		require.Zero(t, testing.AllocsPerRun(100, f), "%s allocates", name)
	}
	noAllocs("New and Free", func() { cmem.Free(cmem.New[record]()) })
	noAllocs("NewSlice and FreeSlice", func() { cmem.FreeSlice(cmem.NewSlice[record](64)) })
	s := cmem.NewSlice[byte](8)
	defer cmem.FreeSlice(s)
	noAllocs("Addr", func() {
		if cmem.Addr(s) == 0 {
			t.Fatal("Addr of a non-empty slice is 0")
		}
	})
	noAllocs("CString and Free", func() { cmem.Free(cmem.CString("mlx5_0")) })
	noAllocs("ArrayString of an empty array", func() {
		if cmem.ArrayString(make([]int8, 4)) != "" {
			t.Fatal("not empty")
		}
	})
}

func TestStrings(t *testing.T) {
	p := cmem.CString("rxe0")
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), 5)
	require.Equal(t, []byte("rxe0\x00"), b, "CString: the bytes and a NUL")
	require.Equal(t, "rxe0", cmem.GoString(p))
	cmem.Free(p)

	p = cmem.CString("")
	require.Zero(t, *p)
	require.Equal(t, "", cmem.GoString(p))
	cmem.Free(p)

	p = cmem.CString("a\x00b") // C sees it cut at the NUL
	require.Equal(t, "a", cmem.GoString(p))
	cmem.Free(p)

	require.Equal(t, "", cmem.GoString(nil))

	arr := func(s string, n int) []int8 {
		a := make([]int8, n)
		for i := range len(s) {
			a[i] = int8(s[i])
		}
		return a
	}
	require.Equal(t, "mlx5_0", cmem.ArrayString(arr("mlx5_0", 64)))
	require.Equal(t, "abcd", cmem.ArrayString(arr("abcd", 4)), "no NUL: the whole array")
	require.Equal(t, "ab", cmem.ArrayString(arr("ab\x00cd", 8)), "up to the first NUL")
	require.Equal(t, "", cmem.ArrayString(arr("\x00ab", 4)))
	require.Equal(t, "", cmem.ArrayString(nil))
	require.Equal(t, "\xff\x80", cmem.ArrayString([]int8{-1, -128, 0}), "bytes above 0x7f are bytes, not signed chars")
}

func TestAddr(t *testing.T) {
	s := cmem.NewSlice[uint32](4)
	defer cmem.FreeSlice(s)
	require.Equal(t, uint64(uintptr(unsafe.Pointer(&s[0]))), cmem.Addr(s))
	require.Equal(t, cmem.Addr(s)+8, cmem.Addr(s[2:]), "the address of the slice's first element")
	require.Zero(t, cmem.Addr[uint32](nil))
	require.Zero(t, cmem.Addr(s[:0]), "empty: 0, though the slice has room")
}
