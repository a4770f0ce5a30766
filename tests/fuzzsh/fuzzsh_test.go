// Package fuzzsh tests tests/fuzz.sh, make fuzz's runner of one fuzz target,
// with a stand-in for the go command.
package fuzzsh

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo writes a go command that answers its runs in turn: each answer is
// its output and exit status, the last one repeated.
func fakeGo(t *testing.T, answers ...string) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\nn=$(cat " + dir + "/n 2>/dev/null || echo 0)\necho $((n + 1)) > " + dir + "/n\ncase $n in\n"
	for i, a := range answers {
		pattern := "*"
		if i < len(answers)-1 {
			pattern = string(rune('0' + i))
		}
		script += pattern + ") " + a + " ;;\n"
	}
	script += "esac\n"
	path := filepath.Join(dir, "go")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	pass     = `printf 'fuzz: elapsed: 0s, gathering baseline coverage: 0/3 completed\nPASS\n'; exit 0`
	race     = `printf -- '--- FAIL: FuzzX (5.07s)\n    context deadline exceeded\nFAIL\n'; exit 1`
	crash    = `printf -- '--- FAIL: FuzzX (1.00s)\n    context deadline exceeded\n    Failing input written to testdata/fuzz/FuzzX/abc\n'; exit 1`
	otherErr = `echo 'panic: boom'; exit 2`
	// What go test says, and passes, when no fuzz target matches -fuzz.
	noTarget = `printf 'testing: warning: no fuzz tests to fuzz\nPASS\n'; exit 0`
)

func TestFuzzScript(t *testing.T) {
	script, err := filepath.Abs("../fuzz.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		answers []string
		rc      int
		reruns  bool
	}{
		{"passes", []string{pass}, 0, false},
		{"race once, then passes", []string{race, pass}, 0, true},
		{"race twice fails", []string{race, race, pass}, 1, true},
		{"a written failing input fails at once", []string{crash, pass}, 1, false},
		{"any other failure fails at once", []string{otherErr, pass}, 2, false},
		{"no such target fails", []string{noTarget}, 1, false},
		{"race, then no such target fails", []string{race, noTarget}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("bash", script, "./pkg", "FuzzX", "5s")
			cmd.Env = append(os.Environ(), "GO="+fakeGo(t, tc.answers...))
			out, err := cmd.CombinedOutput()
			rc := 0
			if ee, ok := err.(*exec.ExitError); ok {
				rc = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if rc != tc.rc {
				t.Errorf("exit status %d, want %d; output:\n%s", rc, tc.rc, out)
			}
			if got := strings.Contains(string(out), "running it once more"); got != tc.reruns {
				t.Errorf("reran: %v, want %v; output:\n%s", got, tc.reruns, out)
			}
		})
	}
}
