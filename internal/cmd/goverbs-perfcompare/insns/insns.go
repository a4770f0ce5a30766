// Package insns reads what qemu's insncount plugin (insncount/insncount.c)
// counted in the soft-RoCE VM and tells, per run of a tool, how many guest
// instructions ran where: in which kernel function, in which of the tool's
// executable mappings (its binary, libibverbs, the rxe provider, libc, the
// vDSO) and, where the file has symbols, in which function.
//
// goverbs-perfcompare -insns and goverbs-rsockcompare -insns bracket every
// run with Marker, so snapshot k and k+1 of the plugin's file enclose one
// run: Intervals turns the file into the instructions of each such
// interval, by block address. A Recorder writes what the guest knows of the
// runs (which tool, how many messages, their mappings, kallsyms), and on
// the host Measure turns that and the snapshots into instructions per
// message by region and function, which Compare prints, C beside Go.
package insns

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Counts is the number of instructions that ran, by the address of the
// translated block they ran in.
type Counts map[uint64]uint64

// Intervals reads a snapshot file and returns, for each pair of consecutive
// snapshots k and k+1, the instructions that ran between them.
func Intervals(r io.Reader) ([]Counts, error) {
	type block struct {
		vaddr  uint64
		ninsns uint64
		count  uint64
	}
	blocks := map[uint64]*block{}
	var out []Counts
	snap := -1
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "snap" {
			k, err := strconv.Atoi(f[1])
			if err != nil || k != snap+1 {
				return nil, fmt.Errorf("line %d: %q: want snap %d", line, sc.Text(), snap+1)
			}
			snap = k
			if k > 0 {
				out = append(out, Counts{})
			}
			continue
		}
		if len(f) != 4 || snap < 0 {
			return nil, fmt.Errorf("line %d: %q: want snap K, or ID VADDR NINSNS COUNT after one", line, sc.Text())
		}
		var v [4]uint64
		for i, base := range []int{10, 16, 10, 10} {
			n, err := strconv.ParseUint(f[i], base, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %q: %v", line, sc.Text(), err)
			}
			v[i] = n
		}
		b := blocks[v[0]]
		if b == nil {
			b = &block{vaddr: v[1], ninsns: v[2]}
			blocks[v[0]] = b
		}
		if v[3] < b.count {
			return nil, fmt.Errorf("line %d: block %d ran %d times, fewer than the %d before", line, v[0], v[3], b.count)
		}
		if snap > 0 {
			out[snap-1][b.vaddr] += (v[3] - b.count) * b.ninsns
		}
		b.count = v[3]
	}
	return out, sc.Err()
}

// Symbol is a function's name and extent.
type Symbol struct {
	Addr, Size uint64 // Size 0: up to the next symbol
	Name       string
}

// Symbols are sorted by address.
type Symbols []Symbol

// Lookup names the function at a, or returns "" for none.
func (s Symbols) Lookup(a uint64) string {
	i, found := slices.BinarySearchFunc(s, a, func(x Symbol, a uint64) int {
		switch {
		case x.Addr < a:
			return -1
		case x.Addr > a:
			return 1
		}
		return 0
	})
	if !found {
		i--
	}
	if i < 0 || (s[i].Size != 0 && a >= s[i].Addr+s[i].Size) {
		return ""
	}
	return s[i].Name
}

func sortSymbols(s Symbols) Symbols {
	slices.SortFunc(s, func(a, b Symbol) int {
		switch {
		case a.Addr < b.Addr:
			return -1
		case a.Addr > b.Addr:
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return s
}

// ReadKallsyms reads /proc/kallsyms's text symbols.
func ReadKallsyms(r io.Reader) (Symbols, error) {
	var s Symbols
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			return nil, fmt.Errorf("kallsyms line %d: %q: want ADDR TYPE NAME", line, sc.Text())
		}
		if f[1] != "t" && f[1] != "T" {
			continue
		}
		a, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("kallsyms line %d: %v", line, err)
		}
		s = append(s, Symbol{Addr: a, Name: f[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(s) == 0 || s[len(s)-1].Addr == 0 {
		return nil, fmt.Errorf("kallsyms: no addresses (kptr_restrict hides them unless root)")
	}
	return sortSymbols(s), nil
}

// Mapping is one executable mapping of a process (/proc/PID/maps).
type Mapping struct {
	Start, End, Offset uint64
	Path               string // [vdso] and the like as the kernel names them
}

// ReadMaps reads a process's executable mappings from /proc/PID/maps.
func ReadMaps(r io.Reader) ([]Mapping, error) {
	var ms []Mapping
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			return nil, fmt.Errorf("maps line %d: %q", line, sc.Text())
		}
		if !strings.Contains(f[1], "x") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("maps line %d: %q", line, sc.Text())
		}
		path := "[anonymous]"
		if len(f) >= 6 {
			path = f[5]
		}
		ms = append(ms, Mapping{Start: start, End: end, Offset: off, Path: path})
	}
	return ms, sc.Err()
}

// kernelBase: x86-64 kernel addresses are the upper half.
const kernelBase = 0xffff800000000000

// Symbolizer names addresses: kernel functions from kallsyms, user
// addresses by the mapping (of any of the given processes) they fall in,
// and by function where the mapped file has symbols.
type Symbolizer struct {
	Kernel Symbols
	Maps   []Mapping
	files  map[string]elfFile // by path
}

// Where returns the region of a (kernel, or the mapped file's base name)
// and the function, "" when unknown.
func (s *Symbolizer) Where(a uint64) (region, fn string) {
	if a >= kernelBase {
		return "kernel", s.Kernel.Lookup(a)
	}
	for _, m := range s.Maps {
		if a < m.Start || a >= m.End {
			continue
		}
		region = filepath.Base(m.Path)
		if !strings.HasPrefix(m.Path, "/") {
			return region, ""
		}
		f := s.file(m.Path)
		if f.fixed {
			return region, f.syms.Lookup(a)
		}
		// A shared library or PIE maps file offset o at o + its load bias
		// (p_vaddr == p_offset in the files here).
		return region, f.syms.Lookup(a - m.Start + m.Offset)
	}
	return "unmapped", ""
}

// elfFile is what a mapped file tells about its functions.
type elfFile struct {
	syms  Symbols
	fixed bool // ET_EXEC: its symbols are the addresses it runs at
}

// file reads the function symbols of an ELF file, the full table or else
// the dynamic one; none when the file cannot be read.
func (s *Symbolizer) file(path string) elfFile {
	if f, ok := s.files[path]; ok {
		return f
	}
	if s.files == nil {
		s.files = map[string]elfFile{}
	}
	var ef elfFile
	if f, err := elf.Open(path); err == nil {
		ef.fixed = f.Type == elf.ET_EXEC
		all, err := f.Symbols()
		if err != nil || len(all) == 0 {
			all, _ = f.DynamicSymbols()
		}
		for _, e := range all {
			if elf.ST_TYPE(e.Info) == elf.STT_FUNC && e.Value != 0 {
				ef.syms = append(ef.syms, Symbol{Addr: e.Value, Size: max(e.Size, 1), Name: e.Name})
			}
		}
		f.Close()
	}
	ef.syms = sortSymbols(ef.syms)
	s.files[path] = ef
	return ef
}

// By sums the counts by key(address).
func (c Counts) By(key func(addr uint64) string) map[string]uint64 {
	out := map[string]uint64{}
	for a, n := range c {
		out[key(a)] += n
	}
	return out
}

// PerMessage is the instructions per message by key, from two runs of the
// same tool of n1 < n2 messages, each summed By the same key: their
// difference over n2 - n1, so that what a run costs once (starting, the
// connection, the teardown) drops out. A key may come out negative by the
// noise of the once-only work.
func PerMessage(run1, run2 map[string]uint64, n1, n2 int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range run2 {
		out[k] += float64(v)
	}
	for k, v := range run1 {
		out[k] -= float64(v)
	}
	for k := range out {
		out[k] /= float64(n2 - n1)
	}
	return out
}
