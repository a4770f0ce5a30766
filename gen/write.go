package gen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Write puts files under root (files keyed "layout/NAME" go to layoutDir)
// all or nothing as far as the file system allows: every new content is
// first written to a temporary file beside its target, and only when all of
// them are written are they renamed into place. A file whose content did not
// change is not touched. In each directory it writes, it then removes the
// generator's files that the run did not produce (see staleFiles), so that
// no output of an earlier configuration is left to clash with this one's.
// It returns the paths it replaced or removed.
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
	produced := map[string]map[string]bool{} // directory -> names written there
	for _, f := range files {
		dest := filepath.Join(root, filepath.FromSlash(f.Path))
		if rest, ok := strings.CutPrefix(f.Path, "layout/"); ok {
			if layoutDir == "" {
				return nil, fmt.Errorf("%s: no layout directory given", f.Path)
			}
			dest = filepath.Join(layoutDir, rest)
		}
		dir := filepath.Dir(dest)
		if produced[dir] == nil {
			produced[dir] = map[string]bool{}
		}
		produced[dir][filepath.Base(dest)] = true
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
	stale, err := staleFiles(produced)
	if err != nil {
		return nil, err
	}
	for i, p := range todo {
		if err := os.Rename(p.tmp, p.dest); err != nil {
			todo = todo[i:]
			return changed, err
		}
		changed = append(changed, p.dest)
	}
	todo = nil
	for _, p := range stale {
		if err := os.Remove(p); err != nil {
			return changed, err
		}
		changed = append(changed, p)
	}
	return changed, nil
}

// staleFiles lists, in each directory of produced (directory -> the names
// the run writes there), the files the generator owns but the run does not
// produce. A file is the generator's only if it could have written it: its
// name has the z<package>_ prefix of a file the run writes in that directory
// and ends in .go or .c, and its leading comment carries the generated-code
// line. Anything else there is hand-written and stays.
func staleFiles(produced map[string]map[string]bool) ([]string, error) {
	var stale []string
	for dir, names := range produced {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			name := e.Name()
			if names[name] || !e.Type().IsRegular() || !ownedName(name, names) {
				continue
			}
			p := filepath.Join(dir, name)
			gen, err := isGenerated(p)
			if err != nil {
				return nil, err
			}
			if gen {
				stale = append(stale, p)
			}
		}
	}
	sort.Strings(stale)
	return stale, nil
}

// ownedName reports whether name reads z<package>_*.go or z<package>_*.c for
// the prefix of one of the names written beside it.
func ownedName(name string, written map[string]bool) bool {
	if filepath.Ext(name) != ".go" && filepath.Ext(name) != ".c" {
		return false
	}
	for w := range written {
		if i := strings.IndexByte(w, '_'); strings.HasPrefix(w, "z") && i > 1 && strings.HasPrefix(name, w[:i+1]) {
			return true
		}
	}
	return false
}

// generatedLine is the line Go tools recognise as marking generated code.
var generatedLine = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// isGenerated reports whether the comment lines that open file include the
// generated-code line (the generator's files open with the command, then it).
func isGenerated(file string) (bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() && strings.HasPrefix(sc.Text(), "//") {
		if generatedLine.MatchString(sc.Text()) {
			return true, nil
		}
	}
	return false, nil
}
