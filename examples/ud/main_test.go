package main

// The example as a Go/Go pair on the soft-RoCE device of `make rxe-test`'s
// VM: the server (run with -l) in one goroutine, the client in another.
// Elsewhere it skips.

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestUDEcho(t *testing.T) {
	if os.Getenv("GOVERBS_IN_VM") != "1" {
		t.Skip("needs a verbs device: GOVERBS_IN_VM=1 is not set, so this is not the soft-RoCE VM; " +
			"run `make rxe-test`, which boots one (internal/cmd/rxevm) and runs this package inside")
	}
	addr := os.Getenv("RXE_ADDR")
	if addr == "" {
		t.Fatal("GOVERBS_IN_VM=1 but RXE_ADDR is empty: run under internal/cmd/rxevm, which sets it")
	}
	pr, pw := io.Pipe()
	var serverErr strings.Builder
	served := make(chan int, 1)
	go func() {
		served <- run([]string{"-l", addr + ":0", "-n", "20", "-s", "200"}, pw, &serverErr)
		pw.Close()
	}()
	// The server's first line names its port.
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("the server printed nothing; exit %d: %s", <-served, serverErr.String())
	}
	listening, ok := strings.CutPrefix(sc.Text(), "listening on ")
	if !ok {
		t.Fatalf("server: %q, want its address", sc.Text())
	}
	go io.Copy(io.Discard, pr)
	var out, errOut strings.Builder
	if code := run([]string{"-c", listening, "-n", "20", "-s", "200"}, &out, &errOut); code != 0 {
		t.Fatalf("client: exit %d: %s", code, errOut.String())
	}
	t.Logf("client: %s", out.String())
	if want := "20 datagrams of 200 bytes each way"; !strings.Contains(out.String(), want) {
		t.Errorf("client printed %q, want %q", out.String(), want)
	}
	select {
	case code := <-served:
		if code != 0 {
			t.Fatalf("server: exit %d: %s", code, serverErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not finish")
	}
}

// Bad command lines are refused with status 2.
func TestUDFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"-l", "a:1", "-c", "b:2"}, {"-c", "b:2", "-n", "0"}, {"-c", "b:2", "-s", "0"}, {"-x"}} {
		var out, errOut strings.Builder
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("run(%q) = %d, want 2; stderr %q", args, code, errOut.String())
		}
	}
}
