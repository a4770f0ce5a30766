package main

// The program as a user runs it: a server and a client, each this test
// binary running main as a child process, on the soft-RoCE VM of
// `make rxe-test`; elsewhere the test skips.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runMainEnv makes the test binary run main instead of the tests.
const runMainEnv = "GOVERBS_ECHO_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The client prints exactly what it sent, and both sides exit 0: on the
// device's address with a message of the test's, and with the defaults (the
// server on ":7471", the client's message).
func TestEcho(t *testing.T) {
	if os.Getenv("GOVERBS_IN_VM") != "1" {
		t.Skip("needs a verbs device: GOVERBS_IN_VM=1 is not set, so this is not the soft-RoCE VM; " +
			"run `make rxe-test`, which boots one (internal/cmd/rxevm) and runs this package inside")
	}
	addr, device := os.Getenv("RXE_ADDR"), os.Getenv("RXE_DEVICE")
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", device)); addr == "" || err != nil {
		t.Fatalf("GOVERBS_IN_VM=1 but RXE_ADDR=%q, device %q: %v", addr, device, err)
	}
	for _, c := range []struct {
		name         string
		server, dial []string
		want         string
	}{
		{"the device's address", []string{"-addr", addr + ":17471"}, []string{"-addr", addr + ":17471", "-msg", fmt.Sprintf("echo %d", os.Getpid())}, fmt.Sprintf("echo %d", os.Getpid())},
		{"defaults", nil, []string{"-addr", addr + ":7471"}, "hello, RDMA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			srv := start(ctx, append([]string{"-server"}, c.server...))
			// The server may not listen yet: a client that found no
			// listener tries again.
			var out string
			var err error
			tries := 1
			for ; ; tries++ {
				out, err = start(ctx, c.dial).wait()
				if err == nil || !strings.Contains(out, "no listener") || ctx.Err() != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			sout, serr := srv.wait()
			if err != nil || out != c.want+"\n" {
				t.Errorf("the client (try %d) printed %q, want %q; exit: %v", tries, out, c.want+"\n", err)
			}
			if serr != nil || sout != "" {
				t.Errorf("the server printed %q, want nothing; exit: %v", sout, serr)
			}
			t.Logf("the client got its echo at try %d", tries)
		})
	}
}

// child is the program running in a child process.
type child struct {
	cmd *exec.Cmd
	out strings.Builder
}

func start(ctx context.Context, args []string) *child {
	c := &child{cmd: exec.CommandContext(ctx, os.Args[0], args...)}
	c.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		c.out.WriteString(err.Error())
	}
	return c
}

// wait waits for the child to exit and returns what it printed.
func (c *child) wait() (string, error) {
	if c.cmd.Process == nil {
		return c.out.String(), fmt.Errorf("not started")
	}
	err := c.cmd.Wait()
	return c.out.String(), err
}
