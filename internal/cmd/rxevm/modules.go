package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// guestModules are the kernel modules the guest loads, by name; their
// dependencies are added from modules.dep. virtio_net is for a guest with a
// NIC (two-host mode), sch_netem for tests that make a link lossy (tc
// qdisc ... netem loss).
var guestModules = []string{
	"virtio_pci",
	"9pnet_virtio",
	"9p",
	"rdma_rxe",
	"rdma_ucm",
	"veth",
	"virtio_net",
	"sch_netem",
}

// crcModule is loaded first where the kernel has it. It is no dependency
// of anything in guestModules, but the rxe of 6.1 and 6.12 asks the
// crypto API for the crc32 shash by name (crypto_alloc_shash), and without
// it `rdma link add ... type rxe` fails with ENOENT. Later rxe calls the
// crc32 library (crc32_le) alone, which Debian builds in, and sid's 7.2
// has no crc32_generic, so it is not required.
const crcModule = "crc32_generic"

// guestModuleNames are the modules to load from this kernel: crcModule
// where it has it, then guestModules.
func (m *moduleDeps) guestModuleNames() []string {
	if _, ok := m.files[crcModule]; ok || m.builtin[crcModule] {
		return append([]string{crcModule}, guestModules...)
	}
	return guestModules
}

// moduleDeps is what depmod wrote for one kernel: each loadable module's file
// (relative to the modules directory) and direct dependencies, and the
// modules built into the kernel image.
type moduleDeps struct {
	files   map[string]string   // name -> path
	deps    map[string][]string // name -> dependency names
	builtin map[string]bool
}

// moduleName turns a path from modules.dep into the module's name:
// "kernel/net/9p/9pnet-virtio.ko.xz" -> "9pnet_virtio". The kernel treats
// '-' and '_' in module names as the same character.
func moduleName(p string) string {
	base := path.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// parseModulesDep reads modules.dep ("path: dep dep ...", one module a line)
// and, when builtin is not nil, modules.builtin (one path a line).
func parseModulesDep(dep, builtin io.Reader) (*moduleDeps, error) {
	m := &moduleDeps{
		files:   map[string]string{},
		deps:    map[string][]string{},
		builtin: map[string]bool{},
	}
	sc := bufio.NewScanner(dep)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		file, rest, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("modules.dep:%d: no ':' in %q", n, line)
		}
		name := moduleName(file)
		m.files[name] = file
		for _, d := range strings.Fields(rest) {
			m.deps[name] = append(m.deps[name], moduleName(d))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("modules.dep: %w", err)
	}
	if builtin != nil {
		sc := bufio.NewScanner(builtin)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				m.builtin[moduleName(line)] = true
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("modules.builtin: %w", err)
		}
	}
	return m, nil
}

// loadModuleDeps reads modules.dep and modules.builtin from a modules
// directory such as ROOT/lib/modules/6.1.0-56-amd64.
func loadModuleDeps(dir string) (*moduleDeps, error) {
	dep, err := os.Open(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	defer dep.Close()
	var builtin io.Reader
	if f, err := os.Open(filepath.Join(dir, "modules.builtin")); err == nil {
		defer f.Close()
		builtin = f
	}
	return parseModulesDep(dep, builtin)
}

// loadOrder returns the files of the named modules and everything they
// depend on, each once, every module after its dependencies: the order in
// which insmod can load them. Built-in modules are left out.
func (m *moduleDeps) loadOrder(names []string) ([]string, error) {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var order []string
	var visit func(name string, from []string) error
	visit = func(name string, from []string) error {
		switch state[name] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("module dependency cycle: %s -> %s", strings.Join(from, " -> "), name)
		}
		file, ok := m.files[name]
		if !ok {
			if m.builtin[name] {
				state[name] = done
				return nil
			}
			if len(from) > 0 {
				return fmt.Errorf("module %s (needed by %s) is not in modules.dep", name, from[len(from)-1])
			}
			return fmt.Errorf("module %s is not in modules.dep", name)
		}
		state[name] = visiting
		chain := append(from[:len(from):len(from)], name) // a copy: siblings must not share it
		for _, d := range m.deps[name] {
			if err := visit(d, chain); err != nil {
				return err
			}
		}
		state[name] = done
		order = append(order, file)
		return nil
	}
	for _, name := range names {
		if err := visit(strings.ReplaceAll(name, "-", "_"), nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}
