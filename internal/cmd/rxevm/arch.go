package main

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
)

// guestArch is what differs between guests of different machine
// architectures: the emulator, its board, and the console's name. A guest's
// architecture is its root's (rootArch), so that a root and the kernel that
// boots it cannot disagree.
type guestArch struct {
	name        string      // GOARCH, as Debian names it too
	machine     elf.Machine // of the root's programs
	qemu        string      // qemu's system emulator
	qemuPackage string      // the Debian package that has it
	board       []string    // qemu's machine and CPU options; none for qemu's default PC
	console     string      // the serial console, for the kernel's command line
	kernelRoot  string      // a root of rxevm -setup-root that brings this architecture's kernel and busybox
}

// amd64 is the architecture of the host rxevm runs on, of the pinned
// kernel and of every root but an arm64 one.
var amd64 = guestArch{name: "amd64", machine: elf.EM_X86_64, qemu: "qemu-system-x86_64", qemuPackage: "qemu-system-x86", console: "ttyS0",
	kernelRoot: "trixie"}

// guestArches are the architectures rxevm boots. arm64 runs on qemu's
// virt board, whose PCI bus takes the same virtio devices as the PC's, with
// a Cortex-A72 (ARMv8.0, which Go's arm64 port needs): -cpu max would
// emulate pointer authentication, which costs TCG much, for nothing the
// tests use.
var guestArches = []guestArch{
	amd64,
	{name: "arm64", machine: elf.EM_AARCH64, qemu: "qemu-system-aarch64", qemuPackage: "qemu-system-arm",
		board: []string{"-machine", "virt", "-cpu", "cortex-a72"}, console: "ttyAMA0", kernelRoot: "bookworm-arm64"},
}

// rootArch returns the architecture of the programs in root, read from the
// ELF header of its /usr/bin/env, the program init runs the command with.
func rootArch(root string) (guestArch, error) {
	if _, err := os.Stat(root); err != nil {
		return guestArch{}, fmt.Errorf("guest root: %w", err)
	}
	p := filepath.Join(root, "usr/bin/env")
	f, err := elf.Open(p)
	if err != nil {
		return guestArch{}, fmt.Errorf("guest root %s: the architecture of its programs: %w", root, err)
	}
	defer f.Close()
	for _, a := range guestArches {
		if a.machine == f.Machine {
			return a, nil
		}
	}
	return guestArch{}, fmt.Errorf("guest root %s: %s is for %v, which rxevm does not boot (amd64 and arm64 only)", root, p, f.Machine)
}

// machine is what boots: an architecture, its kernel, and the static
// busybox that is the initramfs's shell.
type machine struct {
	arch    guestArch
	kernel  kernel
	busybox string
}

// ownKernelMachine is the machine for a root that boots its own kernel
// (bootsOwnKernel): the root must bring that kernel (boot/vmlinuz-V and
// lib/modules/V with modules.dep, one version) and a static busybox, as
// the recipes of bookworm-arm64, trixie-arm64 and trixie do.
func ownKernelMachine(root string, arch guestArch) (machine, error) {
	hint := fmt.Sprintf("(guest root %s is %s and boots its own kernel: it needs that kernel and busybox-static, as rxevm -setup-root %s builds)", root, arch.name, arch.kernelRoot)
	k, err := kernelIn(root)
	if err != nil {
		return machine{}, fmt.Errorf("%w %s", err, hint)
	}
	busybox := filepath.Join(root, "bin/busybox")
	if err := checkStatic(busybox); err != nil { // a missing one too
		return machine{}, fmt.Errorf("%w %s", err, hint)
	}
	return machine{arch: arch, kernel: k, busybox: busybox}, nil
}

// bootsOwnKernel reports whether a guest on root boots the root's own
// kernel rather than the pinned one: every root of another architecture
// than the pinned kernel's, and an amd64 root that carries a kernel
// (boot/vmlinuz-V and lib/modules/V, as the trixie recipe installs
// Debian 13's), so that its rdma-core meets the rxe of its release. The
// host's own / never does: a kernel installed on the host is the host's
// business, and the default guest boots the pinned one whatever the host
// runs.
func bootsOwnKernel(root string, arch guestArch) bool {
	if arch.name != amd64.name {
		return true
	}
	if filepath.Clean(root) == "/" {
		return false
	}
	_, err := kernelIn(root)
	return err == nil
}
