package hand_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEProgram type-checks and vets README's "An RC program with hand/"
// as a user would paste it into a main function, so that the README cannot
// drift from hand's API unnoticed (hand/example_test.go is the checked,
// complete version; README's is shortened and compiled nowhere else).
func TestREADMEProgram(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	i := strings.Index(text, "\n## An RC program with hand/\n")
	if i < 0 {
		t.Fatal(`README.md has no section "## An RC program with hand/"`)
	}
	text = text[i:]
	start := strings.Index(text, "\n```go\n")
	end := strings.Index(text[start+1:], "\n```\n")
	if start < 0 || end < 0 {
		t.Fatal(`README.md: no Go block in "An RC program with hand/"`)
	}
	body := text[start+len("\n```go\n") : start+1+end]
	// The imports the program needs; each is referenced once more so that
	// one the snippet stops using does not fail the build.
	src := `package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"github.com/goverbs/goverbs/hand"
)

var _, _, _, _, _, _ = context.Background, fmt.Println, io.ReadFull, log.Fatal, net.Dial, time.Second
var _ = hand.Open

func main() {
` + body + "\n}\n"
	file := filepath.Join(t.TempDir(), "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// Run from this module, so that the file's imports resolve to it.
	out, err := exec.Command("go", "vet", file).CombinedOutput()
	if err != nil {
		t.Fatalf("README's RC program does not vet as a main function: %v\n%s", err, out)
	}
}
