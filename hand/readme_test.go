package hand_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEProgram checks that README's "A first program" is
// examples/echo/main.go byte for byte, so that the program a user copies
// from the README is the one that builds, vets and runs on soft-RoCE with
// examples/echo's tests (make rxe-test).
func TestREADMEProgram(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile(filepath.Join("..", "examples", "echo", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	const section = "\n## A first program\n"
	text := string(readme)
	i := strings.Index(text, section)
	if i < 0 {
		t.Fatalf("README.md has no section %q", strings.TrimSpace(section))
	}
	text = text[i+len(section):]
	if j := strings.Index(text, "\n## "); j >= 0 {
		text = text[:j+1] // the section alone
	}
	const open, end = "```go\n", "\n```\n"
	start := strings.Index(text, open)
	if start < 0 {
		t.Fatal(`README.md: no Go block in "A first program"`)
	}
	body := text[start+len(open):]
	stop := strings.Index(body, end)
	if stop < 0 {
		t.Fatal(`README.md: the Go block of "A first program" is not closed`)
	}
	block := body[:stop+1] // with its last newline, as a file ends
	if block != string(program) {
		a, b := strings.Split(block, "\n"), strings.Split(string(program), "\n")
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		line := func(l []string) string {
			if n < len(l) {
				return l[n]
			}
			return "(end)"
		}
		t.Fatalf("README's \"A first program\" differs from examples/echo/main.go at line %d of the program:\nREADME:         %q\nexamples/echo:  %q\n(the README shows the program verbatim: copy examples/echo/main.go into it)",
			n+1, line(a), line(b))
	}
}
