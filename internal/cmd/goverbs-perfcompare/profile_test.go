package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/internal/perf/loopallocs"
)

// fakeToolEnv makes the test binary a stand-in for goverbs-perf (TestMain):
// a server that listens on -p and takes one connection, or, given fakeAddr
// last, a client that connects. Each writes its side's name to the file of
// its -cpuprofile, if it has one; both print a clean allocation report, and
// the client a result row, as goverbs-perf does. Given -fake-fail, the
// client fails at once without connecting.
const (
	fakeToolEnv = "GOVERBS_PERFCOMPARE_FAKE_TOOL"
	fakeAddr    = "192.0.2.1"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeToolEnv) != "" {
		if err := fakeTool(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "fake goverbs-perf:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fakeTool(args []string) error {
	var port, profile string
	profiles := 0
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-p":
			port = args[i+1]
		case "-cpuprofile":
			profile = args[i+1]
			profiles++
		}
	}
	if profiles > 1 || port == "" {
		return fmt.Errorf("want at most one -cpuprofile and a -p, got %q", args)
	}
	writeProfile := func(side string) error {
		if profile == "" {
			return nil
		}
		return os.WriteFile(profile, []byte(side), 0o644)
	}
	if args[len(args)-1] != fakeAddr {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			return err
		}
		defer l.Close()
		c, err := l.Accept()
		if err != nil {
			return err
		}
		c.Close()
		loopallocs.Write(os.Stdout, loopallocs.Report{})
		return writeProfile("server")
	}
	if slices.Contains(args, "-fake-fail") {
		return errors.New("-fake-fail: the client fails at once")
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		return err
	}
	c.Close()
	if err := writeProfile("client"); err != nil {
		return err
	}
	fmt.Println(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]")
	fmt.Println(" 64         100            1.00               1.00                 0.016384")
	loopallocs.Write(os.Stdout, loopallocs.Report{})
	return nil
}

// runProfile gives the client of each row, and the server of a row where
// it runs a loop (send_bw, send_lat), its own profile file, named by mode,
// size, -events and side, and writes nothing else there.
func TestRunProfile(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	t.Setenv(fakeToolEnv, "1")
	port := freePorts(t, 3)

	dir := filepath.Join(t.TempDir(), "profiles")
	o := options{perf: exe, device: "rxe0", gid: "1", addr: fakeAddr, loop: "go", port: port,
		modes: []string{"write_bw"}, sizes: []int{64, 4096}, bwIters: 100, maxBytes: 1 << 20, profile: dir}
	require.NoError(t, runProfile(o))
	o.events, o.modes, o.sizes, o.port = true, []string{"send_bw"}, []int{64}, port+2
	require.NoError(t, runProfile(o))

	want := map[string]string{
		"write_bw-64-client.prof":   "client",
		"write_bw-4096-client.prof": "client",
		"send_bw-64-e-client.prof":  "client",
		"send_bw-64-e-server.prof":  "server",
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	got := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		got[e.Name()] = string(b)
	}
	require.Equal(t, want, got)
}

// freePorts finds n consecutive local TCP ports that are free together,
// the run that runProfile takes one a row from, by holding all n at once
// before it lets them go. The kernel chooses the first; a run whose next
// ports are taken is skipped for another. Nothing holds the ports after
// it returns, so another process could still take one in between; that
// makes the test fail, never pass.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		held := []net.Listener{first}
		port := first.Addr().(*net.TCPAddr).Port
		for i := 1; i < n; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+i))
			if err != nil {
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			require.NoError(t, l.Close())
		}
		if len(held) == n {
			return port
		}
	}
	t.Fatalf("no %d consecutive free local TCP ports in 20 tries", n)
	return 0
}
