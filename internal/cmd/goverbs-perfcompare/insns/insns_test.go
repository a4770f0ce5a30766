package insns

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIntervals(t *testing.T) {
	// Block 0 (3 insns at 0x1000) runs 5 times before snap 0, 7 in all by
	// snap 1, and not again; block 1 (2 at 0xffff...) is translated after
	// snap 0; block 2 retranslates 0x1000 (4 insns now).
	in := "snap 0\n0 1000 3 5\n" +
		"snap 1\n0 1000 3 7\n1 ffffffff81000000 2 10\n" +
		"snap 2\n1 ffffffff81000000 2 11\n2 1000 4 1\n"
	got, err := Intervals(strings.NewReader(in))
	require.NoError(t, err)
	require.Equal(t, []Counts{
		{0x1000: 6, 0xffffffff81000000: 20},
		{0x1000: 4, 0xffffffff81000000: 2},
	}, got)

	for _, bad := range []string{
		"0 1000 3 5\n",       // a block before any snapshot
		"snap 1\n",           // snapshots out of order
		"snap 0\n0 1000 3\n", // a field short
		"snap 0\n0 zz 3 5\n", // not hex
		"snap 0\n0 1000 3 5\nsnap 1\n0 1000 3 4\n", // a count going back
	} {
		_, err := Intervals(strings.NewReader(bad))
		require.Error(t, err, "%q", bad)
		require.Contains(t, err.Error(), "line ", "%q", bad)
	}
}

func TestLookup(t *testing.T) {
	s := sortSymbols(Symbols{{Addr: 0x300, Name: "c"}, {Addr: 0x100, Name: "a"}, {Addr: 0x200, Size: 0x10, Name: "b"}})
	for a, want := range map[uint64]string{0xff: "", 0x100: "a", 0x1ff: "a", 0x200: "b", 0x20f: "b", 0x210: "", 0x300: "c", 0x9999: "c"} {
		require.Equal(t, want, s.Lookup(a), "%#x", a)
	}
	require.Equal(t, "", Symbols(nil).Lookup(1))
}

func TestKallsymsAndMaps(t *testing.T) {
	k, err := ReadKallsyms(strings.NewReader("ffffffff81000000 T _stext\nffffffff81000100 t helper\nffffffff82000000 D data\n"))
	require.NoError(t, err)
	require.Len(t, k, 2)
	_, err = ReadKallsyms(strings.NewReader("0000000000000000 T _stext\n"))
	require.ErrorContains(t, err, "kptr_restrict")

	maps := "00400000-00401000 r--p 00000000 00:1f 12 /usr/bin/tool\n" +
		"00401000-00500000 r-xp 00001000 00:1f 12 /usr/bin/tool\n" +
		"7f0000001000-7f0000002000 r-xp 00001000 00:1f 13 /nonexistent/libx.so.1\n" +
		"7fff00000000-7fff00002000 r-xp 00000000 00:00 0 [vdso]\n"
	ms, err := ReadMaps(strings.NewReader(maps))
	require.NoError(t, err)
	require.Len(t, ms, 3)

	s := &Symbolizer{Kernel: k, Maps: ms}
	for a, want := range map[uint64][2]string{
		0xffffffff81000010: {"kernel", "_stext"},
		0xffffffff81000180: {"kernel", "helper"},
		0x401234:           {"tool", ""}, // no such file here: no symbols
		0x7f0000001800:     {"libx.so.1", ""},
		0x7fff00000010:     {"[vdso]", ""},
		0x1234:             {"unmapped", ""},
	} {
		r, f := s.Where(a)
		require.Equal(t, want, [2]string{r, f}, "%#x", a)
	}
	_, err = ReadMaps(strings.NewReader("garbage\n"))
	require.Error(t, err)
}

func TestPerMessage(t *testing.T) {
	key := func(a uint64) string {
		if a >= kernelBase {
			return "kernel"
		}
		return "user"
	}
	// 1000 instructions once per run, then 30 in the kernel and 50 in user
	// space per message.
	run := func(n uint64) Counts {
		return Counts{0xffffffff81000000: 30 * n, 0x1000: 1000 + 20*n, 0x2000: 30 * n}
	}
	got := PerMessage(run(100).By(key), run(300).By(key), 100, 300)
	require.Equal(t, map[string]float64{"kernel": 30, "user": 50}, got)
}

// Where names a function of a real process from its maps and its
// binary's symbol table: a program built here with symbols (go test strips
// its own) prints its maps and where its function is.
func TestWhereProcess(t *testing.T) {
	dir := t.TempDir()
	src := `package main

import (
	"fmt"
	"os"
	"reflect"
)

//go:noinline
func target() {}

func main() {
	target()
	maps, _ := os.ReadFile("/proc/self/maps")
	fmt.Printf("%#x\n%s", reflect.ValueOf(target).Pointer(), maps)
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module probe\n"), 0o644))
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go command to build the probe program: %v", err)
	}
	build := exec.Command(goCmd, "build", "-o", "probe", ".")
	build.Dir = dir
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(filepath.Join(dir, "probe")).Output()
	require.NoError(t, err)

	pcLine, maps, _ := strings.Cut(string(out), "\n")
	pc, err := strconv.ParseUint(pcLine, 0, 64)
	require.NoError(t, err)
	ms, err := ReadMaps(strings.NewReader(maps))
	require.NoError(t, err)
	s := &Symbolizer{Maps: ms}
	region, fn := s.Where(pc)
	require.Equal(t, "probe", region)
	require.Equal(t, "main.target", fn)
	region, fn = s.Where(pc - 1) // just before it: another function
	require.Equal(t, "probe", region)
	require.NotEqual(t, "main.target", fn)
}
