package insns

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// WatchMaps reads before it first waits: stopped at once, it still
// writes the live process's mappings, its own binary's among them.
func TestWatchMaps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.maps")
	WatchMaps(path, os.Getpid())()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	ms, err := ReadMaps(strings.NewReader(string(b)))
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(ms, func(m Mapping) bool { return m.Path == self }), "no mapping of %s in\n%s", self, b)
}

// WatchMaps stops reading once the executable mappings are unchanged:
// data and heap mappings come and go without counting.
func TestExecutable(t *testing.T) {
	a := "00400000-00401000 r-xp 00000000 00:1f 12 /bin/tool\n" +
		"c000000000-c000400000 rw-p 00000000 00:00 0\n"
	b := "00400000-00401000 r-xp 00000000 00:1f 12 /bin/tool\n" +
		"c000000000-c000800000 rw-p 00000000 00:00 0\n"
	c := b + "7f0000000000-7f0000001000 r-xp 00000000 00:1f 13 /lib/libfoo.so.1\n"
	require.Equal(t, executable([]byte(a)), executable([]byte(b)))
	require.NotEqual(t, executable([]byte(b)), executable([]byte(c)))
	require.Equal(t, "00400000-00401000 r-xp 00000000 00:1f 12 /bin/tool\n", executable([]byte(a)))
}

// Two processes of one tool map the same files at addresses of their
// own; the client that has not loaded a library yet does not.
func TestMappedFiles(t *testing.T) {
	server := "00400000-00401000 r-xp 00000000 00:1f 12 /bin/tool\n" +
		"7f0000000000-7f0000001000 r-xp 00000000 00:1f 13 /lib/libfoo.so.1\n" +
		"7f0000002000-7f0000003000 r-xp 00001000 00:1f 13 /lib/libfoo.so.1\n" +
		"7f0000004000-7f0000005000 rw-p 00000000 00:1f 14 /lib/libdata.so\n"
	client := "00400000-00401000 r-xp 00000000 00:1f 12 /bin/tool\n" +
		"7f1000000000-7f1000001000 r-xp 00000000 00:1f 13 /lib/libfoo.so.1\n"
	early := "00400000-00401000 r-xp 00000000 00:1f 12 /bin/tool\n"
	require.Equal(t, "/bin/tool\n/lib/libfoo.so.1", mappedFiles([]byte(server)))
	require.Equal(t, mappedFiles([]byte(server)), mappedFiles([]byte(client)))
	require.NotEqual(t, mappedFiles([]byte(server)), mappedFiles([]byte(early)))
}
