package main

import (
	"slices"
	"strings"
	"testing"
)

// modulesDep is an excerpt of linux-image-6.1.0-56-amd64's modules.dep.
const modulesDep = `kernel/crypto/crc32_generic.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/net/9p/9pnet.ko:
kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko kernel/fs/netfs/netfs.ko
kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko
kernel/fs/netfs/netfs.ko:
kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko: kernel/drivers/infiniband/core/ib_uverbs.ko kernel/drivers/infiniband/core/ib_core.ko kernel/net/ipv6/ip6_udp_tunnel.ko kernel/net/ipv4/udp_tunnel.ko
kernel/drivers/infiniband/core/ib_uverbs.ko: kernel/drivers/infiniband/core/ib_core.ko
kernel/drivers/infiniband/core/ib_core.ko:
kernel/net/ipv6/ip6_udp_tunnel.ko:
kernel/net/ipv4/udp_tunnel.ko:
kernel/drivers/infiniband/core/rdma_ucm.ko: kernel/drivers/infiniband/core/ib_uverbs.ko kernel/drivers/infiniband/core/rdma_cm.ko kernel/drivers/infiniband/core/iw_cm.ko kernel/drivers/infiniband/core/ib_cm.ko kernel/drivers/infiniband/core/ib_core.ko kernel/fs/configfs/configfs.ko
kernel/drivers/infiniband/core/rdma_cm.ko: kernel/drivers/infiniband/core/iw_cm.ko kernel/drivers/infiniband/core/ib_cm.ko kernel/drivers/infiniband/core/ib_core.ko kernel/fs/configfs/configfs.ko
kernel/drivers/infiniband/core/iw_cm.ko: kernel/drivers/infiniband/core/ib_core.ko
kernel/drivers/infiniband/core/ib_cm.ko: kernel/drivers/infiniband/core/ib_core.ko
kernel/fs/configfs/configfs.ko:
kernel/drivers/net/veth.ko:
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/net/sched/sch_netem.ko:
`

func parseDep(t *testing.T, dep, builtin string) *moduleDeps {
	t.Helper()
	m, err := parseModulesDep(strings.NewReader(dep), strings.NewReader(builtin))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// base names, for readable expectations
func names(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = moduleName(f)
	}
	return out
}

func TestLoadOrderGuestModules(t *testing.T) {
	m := parseDep(t, modulesDep, "")
	files, err := m.loadOrder(m.guestModuleNames())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"crc32_generic",
		"virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_ring", "virtio", "virtio_pci",
		"9pnet", "9pnet_virtio",
		"netfs", "fscache", "9p",
		"ib_core", "ib_uverbs", "ip6_udp_tunnel", "udp_tunnel", "rdma_rxe",
		"iw_cm", "ib_cm", "configfs", "rdma_cm", "rdma_ucm",
		"veth",
		"failover", "net_failover", "virtio_net",
		"sch_netem",
	}
	if got := names(files); !slices.Equal(got, want) {
		t.Errorf("load order:\n got %q\nwant %q", got, want)
	}
	if !slices.Contains(files, "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko") {
		t.Errorf("load order %q: want files as modules.dep names them", files)
	}
}

// A kernel whose rxe calls the crc32 library alone (sid's 7.2, which has
// no crc32_generic) loads the rest without it; one that has it built in
// loads nothing for it.
func TestLoadOrderWithoutCRCModule(t *testing.T) {
	dep := strings.Replace(modulesDep, "kernel/crypto/crc32_generic.ko:\n", "kernel/crypto/crc32-cryptoapi.ko.xz:\n", 1)
	for _, c := range []struct{ what, builtin string }{
		{"no crc32_generic at all", ""},
		{"crc32_generic built in", "kernel/crypto/crc32_generic.ko\n"},
	} {
		m := parseDep(t, dep, c.builtin)
		files, err := m.loadOrder(m.guestModuleNames())
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		got := names(files)
		if slices.Contains(got, "crc32_generic") || slices.Contains(got, "crc32_cryptoapi") || !slices.Contains(got, "rdma_rxe") || got[len(got)-1] != "sch_netem" {
			t.Errorf("%s: load order %q", c.what, got)
		}
	}
	// Where it is a module, it is loaded, first.
	m := parseDep(t, modulesDep, "")
	if got := m.guestModuleNames(); got[0] != "crc32_generic" || !slices.Equal(got[1:], guestModules) {
		t.Errorf("modules asked for: %q", got)
	}
}

// Every module must come after everything modules.dep says it needs,
// whatever order the dependencies are listed in.
func TestLoadOrderDependenciesFirst(t *testing.T) {
	m := parseDep(t, modulesDep, "")
	files, err := m.loadOrder([]string{"rdma_ucm", "9p", "virtio_net"})
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, n := range names(files) {
		if _, dup := pos[n]; dup {
			t.Fatalf("%s loaded twice: %q", n, files)
		}
		pos[n] = i
	}
	for name, deps := range m.deps {
		if _, ok := pos[name]; !ok {
			continue
		}
		for _, d := range deps {
			if p, ok := pos[d]; !ok || p > pos[name] {
				t.Errorf("%s must load before %s: %q", d, name, files)
			}
		}
	}
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/net/9p/9pnet_virtio.ko":      "9pnet_virtio",
		"kernel/drivers/net/veth.ko.xz":      "veth",
		"kernel/crypto/crc32-generic.ko.zst": "crc32_generic",
		"veth.ko":                            "veth",
	} {
		if got := moduleName(in); got != want {
			t.Errorf("moduleName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoadOrderNamesWithDashes(t *testing.T) {
	m := parseDep(t, "kernel/a/foo-bar.ko: kernel/a/baz.ko\nkernel/a/baz.ko:\n", "")
	files, err := m.loadOrder([]string{"foo-bar"})
	if want := []string{"kernel/a/baz.ko", "kernel/a/foo-bar.ko"}; err != nil || !slices.Equal(files, want) {
		t.Errorf("loadOrder(foo-bar) = %q, %v; want %q", files, err, want)
	}
}

func TestLoadOrderSkipsBuiltin(t *testing.T) {
	m := parseDep(t, "kernel/a/x.ko:\n", "kernel/drivers/virtio/virtio_pci.ko\n")
	files, err := m.loadOrder([]string{"virtio_pci", "x"})
	if want := []string{"kernel/a/x.ko"}; err != nil || !slices.Equal(files, want) {
		t.Errorf("loadOrder(virtio_pci, x) = %q, %v; want %q", files, err, want)
	}
}

func TestLoadOrderErrors(t *testing.T) {
	m := parseDep(t, "kernel/a/a.ko: kernel/a/missing.ko\nkernel/c/c.ko: kernel/d/d.ko\nkernel/d/d.ko: kernel/c/c.ko\n", "")

	for name, want := range map[string]string{
		"nosuch": "module nosuch is not in modules.dep",
		"a":      "module missing (needed by a) is not in modules.dep",
		"c":      "module dependency cycle: c -> d -> c",
	} {
		_, err := m.loadOrder([]string{name})
		if err == nil || err.Error() != want {
			t.Errorf("loadOrder(%s): error %v, want %q", name, err, want)
		}
	}
}

func TestParseModulesDepRejectsGarbage(t *testing.T) {
	_, err := parseModulesDep(strings.NewReader("kernel/a/a.ko:\nnot a dep line\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "modules.dep:2") {
		t.Errorf("error %v, want one naming modules.dep:2", err)
	}
}
