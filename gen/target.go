package gen

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"modernc.org/cc/v4"
)

// Target is an architecture the generator lays the types out for.
//
// Its C front end is configured from Debian's compiler for that triplet
// (CC, x86_64-linux-gnu-gcc on amd64, aarch64-linux-gnu-gcc elsewhere):
// cc.NewConfig switches the ABI but takes the predefined macros and the
// include search list from the host compiler, which would lay arm64 out
// with amd64's glibc (pthread_mutex_t is 40 bytes there, 48 on arm64).
type Target struct {
	GOOS, GOARCH string
	CC           string // the C compiler whose macros and include paths the front end takes
	Define       string // the macro C predefines for the architecture, for #if in cgo preambles
}

// Name is "linux/arm64".
func (t Target) Name() string { return t.GOOS + "/" + t.GOARCH }

// Targets are the architectures verbsgen knows, by GOOS/GOARCH.
var Targets = map[string]Target{
	"linux/amd64": {GOOS: "linux", GOARCH: "amd64", CC: "x86_64-linux-gnu-gcc", Define: "__x86_64__"},
	"linux/arm64": {GOOS: "linux", GOARCH: "arm64", CC: "aarch64-linux-gnu-gcc", Define: "__aarch64__"},
}

// ParseTargets turns "linux/amd64,linux/arm64" into targets, in that order.
func ParseTargets(s string) ([]Target, error) {
	var ts []Target
	seen := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		t, ok := Targets[n]
		if !ok {
			return nil, fmt.Errorf("unknown target %q (known: linux/amd64, linux/arm64)", n)
		}
		if seen[n] {
			return nil, fmt.Errorf("target %s given twice", n)
		}
		seen[n] = true
		ts = append(ts, t)
	}
	return ts, nil
}

var targetConfigs sync.Map // Target.Name() -> func() (*cc.Config, error)

// targetConfig is the front end's configuration for t, probed once per
// process from t.CC.
func targetConfig(t Target) (*cc.Config, error) {
	f, _ := targetConfigs.LoadOrStore(t.Name(), sync.OnceValues(func() (*cc.Config, error) {
		return probeConfig(t)
	}))
	return f.(func() (*cc.Config, error))()
}

func probeConfig(t Target) (*cc.Config, error) {
	path, err := exec.LookPath(t.CC)
	if err != nil {
		return nil, fmt.Errorf("target %s needs the C compiler %s (Debian: make deps): %w", t.Name(), t.CC, err)
	}
	// ABI and keywords come from NewConfig; the macros and the search list
	// are replaced with t.CC's.
	cfg, err := cc.NewConfig(t.GOOS, t.GOARCH)
	if err != nil {
		return nil, err
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(path, args...)
		cmd.Stdin = strings.NewReader("")
		cmd.Env = append(cmd.Environ(), "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s %s: %v: %s", t.CC, strings.Join(args, " "), err, firstLine(string(out)))
		}
		return string(out), nil
	}
	pre, err := run("-dM", "-E", "-")
	if err != nil {
		return nil, err
	}
	if !strings.Contains(pre, "#define "+t.Define+" ") {
		return nil, fmt.Errorf("%s does not define %s: not a compiler for %s", t.CC, t.Define, t.Name())
	}
	var defs []string
	for _, l := range strings.Split(pre, "\n") {
		if strings.HasPrefix(l, "#") {
			defs = append(defs, l)
		}
	}
	verbose, err := run("-v", "-E", "-")
	if err != nil {
		return nil, err
	}
	var quote, sys []string
	var into *[]string
	for _, l := range strings.Split(verbose, "\n") {
		switch {
		case l == `#include "..." search starts here:`:
			into = &quote
		case l == "#include <...> search starts here:":
			into = &sys
		case l == "End of search list.":
			into = nil
		case into != nil && strings.HasPrefix(l, " "):
			*into = append(*into, filepath.Clean(strings.TrimSpace(l)))
		}
	}
	if len(sys) == 0 {
		return nil, fmt.Errorf("%s -v: no include search list", t.CC)
	}
	cfg.CC = path
	cfg.Predefined = strings.Join(defs, "\n")
	cfg.HostIncludePaths, cfg.HostSysIncludePaths = quote, sys
	cfg.IncludePaths = append(append([]string{""}, quote...), sys...)
	cfg.SysIncludePaths = sys
	return cfg, nil
}
