// Package pairtest runs an example program as separate processes, a server
// and its clients, on the soft-RoCE device of the throwaway VM that `make
// rxe-test` boots, for the examples' tests.
//
// The processes are the test binary itself: an example's TestMain calls
// Main, which runs the example's main instead of the tests when the
// binary was started by Start. Elsewhere than in the VM, Device skips.
package pairtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// runMainEnv marks a process Start made: its TestMain runs main.
const runMainEnv = "GOVERBS_EXAMPLE_RUN_MAIN"

// Main runs main, the example's, when Start started this process, and the
// tests otherwise. An example's TestMain calls it.
func Main(m *testing.M, main func()) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Device returns the address of the VM's soft-RoCE device, skips the test
// outside the VM, and fails it when the VM lacks what it promised.
func Device(t *testing.T) string {
	t.Helper()
	if os.Getenv("GOVERBS_IN_VM") != "1" {
		t.Skip("needs a verbs device: GOVERBS_IN_VM=1 is not set, so this is not the soft-RoCE VM; " +
			"run `make rxe-test`, which boots one (internal/cmd/rxevm) and runs this package inside")
	}
	dev, addr := os.Getenv("RXE_DEVICE"), os.Getenv("RXE_ADDR")
	if dev == "" || addr == "" {
		t.Fatalf("GOVERBS_IN_VM=1 but RXE_DEVICE=%q RXE_ADDR=%q: run under internal/cmd/rxevm, which sets them", dev, addr)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", dev)); err != nil {
		t.Fatalf("in the soft-RoCE VM but device %s is missing (%v)", dev, err)
	}
	return addr
}

// Timeout bounds each process Start runs.
const Timeout = 60 * time.Second

// Proc is one run of the example.
type Proc struct {
	name   string
	args   []string
	lines  chan string // stdout's lines as they come, for WaitLine
	done   chan struct{}
	stderr bytes.Buffer // written by exec until done

	mu     sync.Mutex
	stdout []string
	err    error // the exit, once done is closed
}

// Start runs the example with args as a process called name, ended when
// the test ends or after Timeout.
func Start(t *testing.T, name string, args ...string) *Proc {
	t.Helper()
	return StartTimeout(t, Timeout, name, args...)
}

// StartTimeout is Start for a process that may run longer than Timeout:
// one that moves many bytes through the emulated VM.
func StartTimeout(t *testing.T, timeout time.Duration, name string, args ...string) *Proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	p := &Proc{name: name, args: args, lines: make(chan string, 64), done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.stdout = append(p.stdout, sc.Text())
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default: // nobody waits for lines this far on
			}
		}
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		cancel()
		close(p.done)
	}()
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

// WaitLine returns the rest of the first line of stdout that starts with
// prefix, failing the test when the process ends or Timeout passes first.
func (p *Proc) WaitLine(t *testing.T, prefix string) string {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	for {
		select {
		case line := <-p.lines:
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				return rest
			}
		case <-p.done:
			t.Fatalf("%s ended before it printed %q:\n%s", p.name, prefix, p.output())
		case <-timer.C:
			t.Fatalf("%s did not print %q in %v:\n%s", p.name, prefix, Timeout, p.output())
		}
	}
}

// Wait waits for the process to end and returns its stdout's lines. It
// logs everything the process printed and fails the test unless it exited
// 0.
func (p *Proc) Wait(t *testing.T) []string {
	t.Helper()
	<-p.done
	t.Logf("%s:\n%s", p.name, p.output())
	if p.err != nil {
		t.Errorf("%s: %v", p.name, p.err)
	}
	return p.stdout
}

// Fails waits for the process to end and fails the test unless it exited
// with status 1 and printed want on stderr.
func (p *Proc) Fails(t *testing.T, want string) {
	t.Helper()
	<-p.done
	t.Logf("%s:\n%s", p.name, p.output())
	if code := p.cmdExit(); code != 1 || !strings.Contains(p.stderr.String(), want) {
		t.Errorf("%s exited %d; want 1, with %q on stderr", p.name, code, want)
	}
}

// cmdExit is the exit status, -1 when it did not exit on its own.
func (p *Proc) cmdExit() int {
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &exit):
		return exit.ExitCode()
	}
	return -1
}

// output is the command line, stdout and stderr, for the log.
func (p *Proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	b.WriteString("$ " + strings.Join(p.args, " ") + "\n")
	for _, l := range p.stdout {
		b.WriteString(l + "\n")
	}
	select {
	case <-p.done:
		if p.stderr.Len() > 0 {
			b.WriteString("stderr:\n" + p.stderr.String())
		}
	default: // exec still writes stderr
	}
	return b.String()
}

// ImportsOnly fails the test if the example's own files (those of the
// working directory, tests aside) import anything but the standard library
// and allowed: no unsafe, no cgo.
func ImportsOnly(t *testing.T, allowed ...string) {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	if len(files) == 0 {
		t.Fatal("no Go files but tests: not the example's directory?")
	}
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			std := !strings.Contains(strings.Split(path, "/")[0], ".")
			if path == "unsafe" || path == "C" || !std && !slices.Contains(allowed, path) {
				t.Errorf("%s imports %q: only the standard library (without unsafe and cgo) and %q are allowed", f, path, allowed)
			}
		}
	}
}
