// Command rxevm runs a command inside a throwaway VM that has a real verbs
// device: Debian's kernel under qemu (TCG) with soft-RoCE (rdma_rxe).
//
//	go run ./internal/cmd/rxevm [flags] -- CMD ARGS...
//
// The guest sees the host's filesystem, or the -root directory, read-only (a
// chroot over 9p, with tmpfs on /tmp and /run) and the current directory
// read-write at the same path, where CMD runs. It has rxe0 on veth0
// (192.0.2.1) and rxe1 on veth1 (192.0.2.2); GID index 1 is the RoCE v2
// IPv4 GID. CMD gets HOME=/tmp, the caller's PATH (plus the standard
// directories), an unlimited locked-memory limit and
//
//	RXE_DEVICE=rxe0 RXE_GID_INDEX=1 RXE_ADDR=192.0.2.1 GOVERBS_IN_VM=1
//
// The guest's console is copied to stdout as it comes. rxevm exits with
// CMD's status; with 124 when -timeout expires (qemu is killed); with 125
// when rxevm itself fails or the guest stops without reporting a status.
// A guest whose kernel panics before CMD starts (TCG provokes one now and
// then) is booted afresh once, with a line that says so; a second panic,
// a failed setup or a crash once CMD runs ends the run. Two-host runs are
// not booted again: the other host's command would already be running.
//
// On first use rxevm installs the host packages it needs (apt-get) and
// downloads the kernel package into the -cache directory; -setup-only does
// just that. Times under TCG are for correctness, never for performance.
//
// With -root DIR the guest chroots into DIR instead of the host's /: another
// Debian release's root, with its own rdma-core userspace (the kernel stays
// the pinned Debian 12 one, unless the root brings its own, as trixie's and
// sid's do: see bootsOwnKernel). rxevm logs the version of the kernel it
// boots, either way. Only DIR and the working directory are in
// the guest, so the command and its files must be in one of them: build
// test binaries under the working directory. rxevm makes the working
// directory's path inside DIR, and runs DIR's own ip and rdma (/bin/ip on
// Debian 11). The roots the project tests against are built by
//
//	go run ./internal/cmd/rxevm -setup-root NAME
//
// once (mmdebstrap, from the Debian archive of the machine's apt sources)
// into -cache/roots/NAME, whose path it prints; NAME is bullseye (rdma-core
// 33.2), trixie (56.1, with Debian 13's kernel), sid (unstable, with its
// kernel), bookworm-arm64 (Debian 12 for arm64, 44.0), trixie-arm64
// (Debian 13 for arm64, 56.1) or nordma (Debian 12 without rdma-core). A
// second run finds the root's stamp and does nothing.
//
// The guest's architecture is its root's, read from the root's
// /usr/bin/env. A root of arm64 programs, as bookworm-arm64's, boots under
// qemu-system-aarch64 (the virt board, a Cortex-A72; TCG), with the
// root's own kernel, modules and static busybox, since the pinned kernel
// is amd64's: the command must then be an arm64 program too (GOARCH=arm64
// with CC=aarch64-linux-gnu-gcc for cgo).
//
// With -hosts 2, rxevm boots two guests, host a and host b, each with its
// own kernel and rxe0 on a virtio NIC (eth0), linked by qemu UDP sockets on
// the host's loopback:
//
//	go run ./internal/cmd/rxevm -hosts 2 [flags] -- CMD_A ARGS... [-- CMD_B ARGS...]
//
// runs CMD_A on host a and CMD_B (CMD_A again when not given) on host b at
// the same time, both in the current directory, and streams both consoles,
// each line prefixed with "a| " or "b| ". Each command is told who it is:
//
//	host a: RXE_HOST=a RXE_ROLE=server RXE_ADDR=192.0.2.1 RXE_PEER_ADDR=192.0.2.2
//	host b: RXE_HOST=b RXE_ROLE=client RXE_ADDR=192.0.2.2 RXE_PEER_ADDR=192.0.2.1
//
// with RXE_DEVICE=rxe0 RXE_GID_INDEX=1 RXE_NETDEV=eth0 on both, and
// RXEVM_KILL_PEER, a line that a command prints on its own to have rxevm
// kill the other host's qemu at once, as a crash or a power cut would (for
// fault tests; that host then counts as having succeeded). rxevm exits
// non-zero if either command fails, if either guest dies or outlives
// -timeout, or if one is still running -peer-grace after the other ended.
//
// rxevm needs no RDMA hardware and no kernel support on the host; it does
// need a Debian 12 (amd64) host, and root or sudo for apt-get.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Exit statuses of rxevm's own, beside the command's.
const (
	exitTimeout = 124
	exitFailure = 125
)

type options struct {
	timeout    time.Duration
	mem        string
	smp        int
	icount     string
	plugin     string
	kernelArgs string
	cacheDir   string
	kernelPkg  string
	setupOnly  bool
	setupRoot  string // a root recipe's name
	root       string // the guest's root filesystem on the host
	verbose    bool
	env        []string // extra KEY=VALUE for the command
	workdir    string
	command    []string

	// Two-host mode.
	hosts       int
	peerCommand []string // host b's; the same as command when not given
	peerGrace   time.Duration
}

// envFlag collects repeated -env KEY=VALUE flags.
type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, " ") }

func (e *envFlag) Set(s string) error {
	if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	*e = append(*e, s)
	return nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("rxevm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: rxevm [flags] -- CMD ARGS...\n"+
			"       rxevm -hosts 2 [flags] -- CMD_A ARGS... [-- CMD_B ARGS...]\n"+
			"       rxevm -setup-only [flags]\n"+
			"       rxevm -setup-root NAME [flags]\n\n"+
			"Runs CMD in a throwaway soft-RoCE VM (device rxe0) in the current directory\n"+
			"and exits with its status; with -hosts 2, CMD_A and CMD_B in two linked VMs.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "kill the VM after this long (boot included)")
	fs.StringVar(&o.mem, "mem", "2G", "guest memory, as qemu -m takes it")
	fs.IntVar(&o.smp, "smp", 2, "guest CPUs (each guest's; 1 by default with -hosts 2)")
	fs.StringVar(&o.icount, "icount", "", "qemu's -icount `VALUE` (e.g. shift=3,sleep=off): guest time counts instructions, not host time; all vCPUs then share one host thread (with -smp 2, Debian 12's qemu 7.2 never runs the second CPU once the first waits for it at boot, and the guest hangs)")
	fs.StringVar(&o.plugin, "plugin", "", "qemu's -plugin `VALUE` (FILE.so,KEY=VALUE...): a TCG plugin, as goverbs-perfcompare's insncount (make perf-insns)")
	fs.StringVar(&o.kernelArgs, "kernel-args", "", "more of the guest kernel's command line, as `ARGS` (e.g. clocksource=tsc tsc=reliable: see BENCHMARKS.md, \"How perf-compare runs\")")
	fs.IntVar(&o.hosts, "hosts", 1, "1, or 2 for two linked guests (host a and host b)")
	fs.DurationVar(&o.peerGrace, "peer-grace", 2*time.Minute, "with -hosts 2: how long one host may outlive the other")
	fs.StringVar(&o.cacheDir, "cache", "/var/cache/goverbs-rxevm", "where the kernel package is downloaded and unpacked, once")
	fs.StringVar(&o.kernelPkg, "kernel-pkg", pinnedKernel, "Debian kernel package to boot (the default, when the archive has dropped it, gives way to the newest of its series, which rxevm names)")
	fs.BoolVar(&o.setupOnly, "setup-only", false, "install host packages and prepare the cache; do not boot")
	fs.StringVar(&o.root, "root", "/", "host directory the guest chroots into (read-only), with the working directory's path made in it")
	fs.StringVar(&o.setupRoot, "setup-root", "", "build the root called `NAME` under -cache/roots once, print its path; do not boot")
	fs.BoolVar(&o.verbose, "v", false, "say what is being done, and show the guest's boot")
	fs.Var((*envFlag)(&o.env), "env", "KEY=VALUE added to the command's environment (repeatable)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.command = fs.Args()
	o.root = filepath.Clean(o.root)
	smpSet := false
	fs.Visit(func(f *flag.Flag) { smpSet = smpSet || f.Name == "smp" })
	if o.hosts == 2 {
		// Two TCG guests share the machine's cores: one CPU each unless asked.
		if !smpSet {
			o.smp = 1
		}
		if i := slices.Index(o.command, "--"); i >= 0 {
			o.command, o.peerCommand = o.command[:i], o.command[i+1:]
		} else {
			o.peerCommand = o.command
		}
	}
	switch {
	case o.hosts != 1 && o.hosts != 2:
		return o, fmt.Errorf("-hosts %d: want 1 or 2", o.hosts)
	case o.hosts == 2 && !o.setupOnly && (len(o.command) == 0 || len(o.peerCommand) == 0):
		fs.Usage()
		return o, errors.New("-hosts 2: a command for each host, or one for both")
	case o.peerGrace <= 0:
		return o, errors.New("-peer-grace must be positive")
	case o.setupOnly && len(o.command) > 0:
		return o, errors.New("-setup-only takes no command")
	case o.setupRoot != "" && (len(o.command) > 0 || o.setupOnly):
		return o, errors.New("-setup-root takes no command and no -setup-only")
	case !filepath.IsAbs(o.root):
		return o, fmt.Errorf("-root %s: want an absolute path", o.root)
	case !o.setupOnly && o.setupRoot == "" && len(o.command) == 0:
		fs.Usage()
		return o, errors.New("no command given")
	case o.smp < 1:
		return o, errors.New("-smp must be at least 1")
	case o.timeout <= 0:
		return o, errors.New("-timeout must be positive")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rxevm:", err)
		os.Exit(2)
	}
	if o.workdir, err = os.Getwd(); err != nil {
		fmt.Fprintln(os.Stderr, "rxevm:", err)
		os.Exit(exitFailure)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code, err := run(ctx, o, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rxevm:", err)
	}
	os.Exit(code)
}

// run prepares the host, boots the guest, runs the command and returns the
// exit status rxevm should end with; a non-nil error says why rxevm failed.
func run(ctx context.Context, o options, stdout, stderr io.Writer) (int, error) {
	h := &host{log: stderr, verbose: o.verbose}
	if o.setupRoot != "" {
		return setupRoot(ctx, h, o, stdout)
	}
	arch, err := rootArch(o.root)
	if err != nil {
		return exitFailure, err
	}
	if bootsOwnKernel(o.root, arch) {
		return runOwnKernel(ctx, h, arch, o, stdout)
	}
	if err := h.ensurePackages(ctx, hostPackages); err != nil {
		return exitFailure, err
	}
	ensure := h.ensureKernel
	if o.kernelPkg == pinnedKernel {
		ensure = h.ensurePinnedKernel
	}
	k, err := ensure(ctx, o.cacheDir, o.kernelPkg)
	if err != nil {
		return exitFailure, err
	}
	// Named as runOwnKernel names a root's, so that every guest's output
	// (perf-compare's, perf-insns') says which rxe it ran on: the pinned
	// package's, a later one of its series when the archive has dropped
	// it (logged above), or -kernel-pkg's.
	h.logf("%s guest: kernel %s", amd64.name, filepath.Base(k.modulesDir))
	if o.setupOnly {
		h.logf("ready: kernel %s", k.vmlinuz)
		return 0, nil
	}
	// The host's static busybox (hostPackages) for an amd64 guest.
	return boot(ctx, h, machine{arch: amd64, kernel: k, busybox: "/bin/busybox"}, o, stdout)
}

// runOwnKernel is run for a root that boots its own kernel
// (bootsOwnKernel): it boots that kernel, which it names, as the root's
// recipe fixed it when the root was built (see bookworm-arm64's and
// trixie's).
func runOwnKernel(ctx context.Context, h *host, arch guestArch, o options, stdout io.Writer) (int, error) {
	if o.kernelPkg != pinnedKernel {
		return 2, fmt.Errorf("-kernel-pkg %s: guest root %s is %s and boots its own kernel", o.kernelPkg, o.root, arch.name)
	}
	m, err := ownKernelMachine(o.root, arch)
	if err != nil {
		return exitFailure, err
	}
	if err := h.ensurePackages(ctx, []string{arch.qemuPackage}); err != nil {
		return exitFailure, err
	}
	h.logf("%s guest: the root's kernel %s", arch.name, filepath.Base(m.kernel.modulesDir))
	if o.setupOnly {
		h.logf("ready: kernel %s", m.kernel.vmlinuz)
		return 0, nil
	}
	return boot(ctx, h, m, o, stdout)
}

// setupRoot builds the root called o.setupRoot unless it is in the cache,
// and prints its directory.
func setupRoot(ctx context.Context, h *host, o options, stdout io.Writer) (int, error) {
	r, err := findRootRecipe(o.setupRoot)
	if err != nil {
		return 2, err
	}
	if err := h.ensurePackages(ctx, rootPackages); err != nil {
		return exitFailure, err
	}
	root, err := h.ensureRoot(ctx, o.cacheDir, r, func() (string, error) { return debianArchiveURI("/etc/apt") })
	if err != nil {
		return exitFailure, err
	}
	rdma := "no rdma-core"
	if v, err := installedVersion(root, "libibverbs1"); err != nil {
		return exitFailure, err
	} else if v != "" {
		rdma = "libibverbs1 " + v
	}
	if v, err := kernelVersion(root); err == nil {
		rdma += ", its own kernel " + v // fixed when the root was built
	}
	h.logf("root %s ready: %s (%s, %s)", r.name, root, r.suite, rdma)
	fmt.Fprintln(stdout, root)
	return 0, nil
}

// guestEnv is the command's whole environment inside the guest.
func guestEnv(net network, extra []string) []string {
	env := []string{"HOME=/tmp", "PATH=" + guestPath(os.Getenv("PATH")), "GOVERBS_IN_VM=1"}
	env = append(env, net.env...)
	return append(env, extra...) // last wins: -env can override the rest
}

func newNonce() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// boot runs the command in a fresh guest of machine m, or the two commands
// in two linked guests with -hosts 2.
func boot(ctx context.Context, h *host, m machine, o options, stdout io.Writer) (int, error) {
	modules, err := moduleFiles(m.kernel)
	if err != nil {
		return exitFailure, err
	}
	if o.verbose {
		h.logf("modules: %s", strings.Join(modules, " "))
	}
	return bootWith(ctx, h, modules, m, o, stdout)
}

// bootWith is boot with the module files found.
func bootWith(ctx context.Context, h *host, modules []string, m machine, o options, stdout io.Writer) (int, error) {
	tools, err := prepareRoot(o.root, o.workdir)
	if err != nil {
		return exitFailure, err
	}
	if o.hosts == 2 {
		return bootPair(ctx, h, modules, m, o, tools, stdout)
	}
	return runGuest(ctx, h, o.timeout, stdout, func() (guest, error) {
		g, err := newGuest(modules, m, o, vethNetwork(tools), o.command, newNonce(), nil)
		if err == nil && o.verbose {
			h.logf("$ %s %s", g.vm.qemu, shellJoin(g.vm.args()))
		}
		return g, err
	})
}

// bootAttempts is how many guests runGuest boots at most: a kernel that
// panics at boot is TCG's rare flake, one that panics twice is not.
const bootAttempts = 2

// runGuest runs the guest that prepare makes and returns its command's
// status. When the guest's kernel panics before the command starts, it
// says so and runs a fresh guest, up to bootAttempts in all: nothing of
// the command ran, and an unlucky boot must not fail a whole test run.
// A guest that fails its own setup, or whose command started, is not
// run again. Each guest gets its own initramfs and -timeout.
func runGuest(ctx context.Context, h *host, timeout time.Duration, stdout io.Writer, prepare func() (guest, error)) (int, error) {
	for attempt := 1; ; attempt++ {
		g, err := prepare()
		if err != nil {
			return exitFailure, err
		}
		code, err := g.vm.run(ctx, timeout, g.plan, stdout, h)
		g.cleanup()
		if attempt < bootAttempts && errors.Is(err, errPanicBeforeCommand) && ctx.Err() == nil {
			h.logf("%v: booting a fresh guest (attempt %d of %d)", err, attempt+1, bootAttempts)
			continue
		}
		return code, err
	}
}

// moduleFiles returns the paths of the modules the guest loads, in load
// order.
func moduleFiles(k kernel) ([]string, error) {
	deps, err := loadModuleDeps(k.modulesDir)
	if err != nil {
		return nil, err
	}
	files, err := deps.loadOrder(deps.guestModuleNames())
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(k.modulesDir, f)
	}
	return paths, nil
}

// guest is one prepared guest: its plan, its qemu and the initramfs file
// that cleanup removes.
type guest struct {
	plan guestPlan
	vm   vm
}

func (g guest) cleanup() { os.Remove(g.vm.initrd) }

// newGuest renders the init script of a guest wired by net that runs
// command, with extraEnv before -env's and markers made of nonce, and
// writes its initramfs.
func newGuest(modules []string, m machine, o options, net network, command []string, nonce string, extraEnv []string) (guest, error) {
	names := make([]string, len(modules))
	for i, m := range modules {
		names[i] = filepath.Base(m)
	}
	plan := guestPlan{
		Modules: names,
		Workdir: o.workdir,
		Net:     net,
		Command: command,
		Nonce:   nonce,
	}
	plan.Env = guestEnv(net, append(extraEnv, o.env...))
	initSh, err := initScript(plan)
	if err != nil {
		return guest{}, err
	}
	initrd, err := writeInitrd(m.busybox, modules, initSh)
	if err != nil {
		return guest{}, err
	}
	qemu, err := exec.LookPath(m.arch.qemu)
	if err != nil {
		os.Remove(initrd)
		return guest{}, err
	}
	return guest{plan: plan, vm: vm{qemu: qemu, arch: m.arch, kernel: m.kernel.vmlinuz, initrd: initrd, root: o.root, workdir: o.workdir,
		mem: o.mem, smp: o.smp, icount: o.icount, plugin: o.plugin, kernelArgs: o.kernelArgs, netArgs: net.qemuArgs, files: net.files, quiet: !o.verbose}}, nil
}

// writeInitrd writes the guest's initramfs, with busybox (a static one of
// the guest's architecture), to a temporary file and returns its name.
func writeInitrd(busybox string, modules []string, initSh string) (string, error) {
	if err := checkStatic(busybox); err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "rxevm-*.initrd")
	if err != nil {
		return "", err
	}
	err = writeInitramfs(f, busybox, modules, initSh)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
