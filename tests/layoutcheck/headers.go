package layoutcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Header is a header file the layouts were generated from: its path
// relative to the include directory ("infiniband/verbs.h") and the SHA-256
// of its bytes, in hex.
type Header struct {
	Path, SHA256 string
}

// HeadersEnv names the environment variable that tells a layout test
// generated without -cgo-include where the headers its C side compiles
// against are, when that is not the -headers directory it was generated
// from (a site include directory given in CGO_CFLAGS, say).
const HeadersEnv = "GOVERBS_LAYOUT_HEADERS"

// IncludeDir is the directory named by HeadersEnv, or generated if that is
// unset or empty.
func IncludeDir(generated string) string {
	if d := os.Getenv(HeadersEnv); d != "" {
		return d
	}
	return generated
}

// StaleHeaders compares the headers in dir with want, the ones the layouts
// were generated from, and returns one line for each that differs or is
// gone, in want's order; nil if all are the same. It reads the files each
// time it runs: go test's cache keys on neither headers outside the module
// nor on C_INCLUDE_PATH or CPATH, so a cached pass proves nothing about the
// headers there now.
func StaleHeaders(dir string, want []Header) []string {
	var out []string
	for _, h := range want {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(h.Path)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out = append(out, fmt.Sprintf("header %s is gone from %s", h.Path, dir))
		case err != nil:
			out = append(out, fmt.Sprintf("header %s: %v", h.Path, err))
		default:
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != h.SHA256 {
				out = append(out, fmt.Sprintf("header %s in %s differs from the one the layouts were generated from (sha256 %s, generated from %s)", h.Path, dir, got, h.SHA256))
			}
		}
	}
	return out
}

// CheckHeaders fails t if the headers in dir are not the ones the layouts
// were generated from (StaleHeaders), naming the first that differs: the
// generated packages and their layout test then describe other headers, and
// whatever the rest of the test says, the layouts are not proven. regen is
// the command that regenerates them.
func CheckHeaders(t testing.TB, dir string, want []Header, regen string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("no header digests were generated: nothing ties this layout test to its headers")
	}
	stale := StaleHeaders(dir, want)
	if len(stale) == 0 {
		t.Logf("headers in %s: the %d the layouts were generated from, unchanged", dir, len(want))
		return
	}
	more := ""
	if len(stale) > 1 {
		more = fmt.Sprintf(" (%d more differ)", len(stale)-1)
	}
	t.Fatalf("%s%s: the layouts were generated from other headers than these; regenerate the packages and this test for these headers (%s)", stale[0], more, regen)
}
