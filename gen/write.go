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
// and, in each directory it writes, removes the generator's files that the
// run did not produce (see staleFiles), so that no output of an earlier
// configuration is left to clash with this one's. A file whose content did
// not change is not touched. It returns the paths it replaced, created or
// removed.
//
// It is all or nothing as far as POSIX allows. First it stages: it creates
// the missing directories, writes every new content to a temporary file
// beside its target and copies every file it will replace to a backup
// beside it; a failure there removes all of that, directories included.
// Then it commits, renaming each temporary file over its target and each
// stale file aside; if a rename fails, the ones already done are undone
// (the old files renamed back, new ones removed) before the error returns.
// The backups are deleted only once every rename has succeeded.
//
// The limits: the renames are atomic one by one, not together, so a reader
// running at the same time can see old and new files mixed; a crash during
// the commit leaves that mix, and hidden .NAME.tmp* and .NAME.old* files
// beside it; an undo that itself fails is named in the error and its
// backup kept; restored files get back their content, mode and
// modification time, not their inode; and the directories' own
// modification times change.
func Write(root, layoutDir string, files []File) (changed []string, err error) {
	dests, err := destinations(root, layoutDir, files)
	if err != nil {
		return nil, err
	}
	var p plan
	defer func() {
		if err != nil {
			p.discard()
		}
	}()
	for i, f := range files {
		if err := p.stageFile(dests[i], f.Data); err != nil {
			return nil, err
		}
	}
	stale, err := staleFiles(producedBy(dests))
	if err != nil {
		return nil, err
	}
	for _, s := range stale {
		if err := p.stageRemoval(s); err != nil {
			return nil, err
		}
	}
	return p.commit()
}

// destinations is where each file goes.
func destinations(root, layoutDir string, files []File) ([]string, error) {
	dests := make([]string, len(files))
	for i, f := range files {
		dests[i] = filepath.Join(root, filepath.FromSlash(f.Path))
		if rest, ok := strings.CutPrefix(f.Path, "layout/"); ok {
			if layoutDir == "" {
				return nil, fmt.Errorf("%s: no layout directory given", f.Path)
			}
			dests[i] = filepath.Join(layoutDir, rest)
		}
	}
	return dests, nil
}

// producedBy maps each directory of dests to the names written there.
func producedBy(dests []string) map[string]map[string]bool {
	produced := map[string]map[string]bool{}
	for _, d := range dests {
		dir := filepath.Dir(d)
		if produced[dir] == nil {
			produced[dir] = map[string]bool{}
		}
		produced[dir][filepath.Base(d)] = true
	}
	return produced
}

// rename is os.Rename; tests replace it to fail a commit midway.
var rename = os.Rename

// plan is what Write stages, then commits or discards.
type plan struct {
	created []string // directories made for the run, parents first
	steps   []*step
}

// step changes one path: the new content at tmp is renamed over dest
// (tmp empty: dest is removed), and backup holds the old file (backup
// empty: there was none).
type step struct {
	dest, tmp, backup string
	done              bool // applied and not undone: its backup is the old file
}

// stageFile stages content data for dest unless dest already holds it.
func (p *plan) stageFile(dest string, data []byte) error {
	old, err := os.ReadFile(dest)
	exists := err == nil
	if exists && bytes.Equal(old, data) {
		return nil
	}
	if !exists && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s := &step{dest: dest}
	p.steps = append(p.steps, s)
	if err := p.mkdirAll(filepath.Dir(dest)); err != nil {
		return err
	}
	if s.tmp, err = tempCopy(dest, ".tmp", data, 0o644); err != nil {
		return err
	}
	if !exists {
		return nil
	}
	fi, err := os.Stat(dest)
	if err != nil {
		return err
	}
	if s.backup, err = tempCopy(dest, ".old", old, fi.Mode().Perm()); err != nil {
		return err
	}
	return os.Chtimes(s.backup, fi.ModTime(), fi.ModTime())
}

// stageRemoval stages the removal of dest: the commit renames it over an
// empty file reserved for it here, its backup.
func (p *plan) stageRemoval(dest string) error {
	s := &step{dest: dest}
	p.steps = append(p.steps, s)
	var err error
	s.backup, err = tempCopy(dest, ".old", nil, 0o600)
	return err
}

// tempCopy writes data to a new hidden file beside dest (.NAME<suffix>*)
// with permissions perm and returns its path.
func tempCopy(dest, suffix string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+suffix+"*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), perm)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// mkdirAll is os.MkdirAll that records the directories it creates.
func (p *plan) mkdirAll(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil {
			return err
		}
		p.created = append(p.created, missing[i])
	}
	return nil
}

// commit applies every step, undoing those done if one fails, and returns
// the paths changed.
func (p *plan) commit() ([]string, error) {
	var changed []string
	for i, s := range p.steps {
		var err error
		if s.tmp != "" {
			err = rename(s.tmp, s.dest)
		} else {
			err = rename(s.dest, s.backup)
		}
		if err != nil {
			if uerr := p.undo(p.steps[:i]); uerr != nil {
				return nil, fmt.Errorf("%w; undoing the changes before it: %v (the old file is kept beside it)", err, uerr)
			}
			return nil, err
		}
		s.done = true
		changed = append(changed, s.dest)
	}
	for _, s := range p.steps {
		if s.backup != "" {
			os.Remove(s.backup) // the run is complete: a leftover is only clutter
		}
	}
	return changed, nil
}

// undo reverts the steps done, last first, and returns the first failure.
func (p *plan) undo(done []*step) error {
	var first error
	for i := len(done) - 1; i >= 0; i-- {
		s := done[i]
		var err error
		if s.backup != "" {
			err = rename(s.backup, s.dest)
		} else {
			err = os.Remove(s.dest)
		}
		if err != nil && first == nil {
			first = err
		}
		if err == nil {
			s.done = false
		}
	}
	return first
}

// discard removes what staging made, except the backups of steps that
// could not be undone, and the directories it created, deepest first.
func (p *plan) discard() {
	for _, s := range p.steps {
		if s.tmp != "" {
			os.Remove(s.tmp)
		}
		if s.backup != "" && !s.done {
			os.Remove(s.backup)
		}
	}
	for i := len(p.created) - 1; i >= 0; i-- {
		os.Remove(p.created[i])
	}
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

// ownedName reports whether name reads z<package>_*.go, .c or .h for the
// prefix of one of the names written beside it.
func ownedName(name string, written map[string]bool) bool {
	if ext := filepath.Ext(name); ext != ".go" && ext != ".c" && ext != ".h" {
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
