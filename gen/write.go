package gen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Write puts files under root (files keyed "layout/NAME" go to layoutDir)
// all or nothing as far as the file system allows: every new content is
// first written to a temporary file beside its target, and only when all of
// them are written are they renamed into place. A file whose content did not
// change is not touched. It returns the paths it replaced.
func Write(root, layoutDir string, files []File) (changed []string, err error) {
	type pending struct{ tmp, dest string }
	var todo []pending
	defer func() {
		if err != nil {
			for _, p := range todo {
				os.Remove(p.tmp)
			}
		}
	}()
	for _, f := range files {
		dest := filepath.Join(root, filepath.FromSlash(f.Path))
		if rest, ok := strings.CutPrefix(f.Path, "layout/"); ok {
			if layoutDir == "" {
				return nil, fmt.Errorf("%s: no layout directory given", f.Path)
			}
			dest = filepath.Join(layoutDir, rest)
		}
		old, rerr := os.ReadFile(dest)
		if rerr == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, rerr
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return nil, err
		}
		tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp*")
		if err != nil {
			return nil, err
		}
		todo = append(todo, pending{tmp.Name(), dest})
		if _, err := tmp.Write(f.Data); err != nil {
			tmp.Close()
			return nil, err
		}
		if err := tmp.Close(); err != nil {
			return nil, err
		}
		if err := os.Chmod(tmp.Name(), 0o644); err != nil {
			return nil, err
		}
	}
	for i, p := range todo {
		if err := os.Rename(p.tmp, p.dest); err != nil {
			todo = todo[i:]
			return changed, err
		}
		changed = append(changed, p.dest)
	}
	todo = nil
	return changed, nil
}
