package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
)

// network is how the guest's soft-RoCE devices are wired: the qemu arguments
// that give the guest its NICs (none for a single host) and the descriptors
// qemu inherits for them (as 3, 4, ...), the commands that
// create the links and rxe devices (run in the chroot of the guest's root),
// the rxe devices to wait for, and what the command is told through its
// environment. vethNetwork is the single host's, pairNetwork each of two
// hosts'; both run the root's own ip and rdma (tools).
type network struct {
	qemuArgs []string
	files    []*os.File
	setup    [][]string
	devices  []string
	env      []string
}

// vethNetwork is the single-host wiring: no NIC, a veth pair with an address
// at each end, rxe0 on veth0 and rxe1 on veth1. GID index 1 of each device is
// the RoCE v2 GID of its IPv4 address. (rdma link add on lo fails on this
// kernel; QPs on the same rxe device talk, QPs on rxe0 and rxe1 do not.)
func vethNetwork(tools guestTools) network {
	ip, rdma := tools.ip, tools.rdma
	return network{
		qemuArgs: []string{"-nic", "none"},
		setup: [][]string{
			{ip, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1"},
			{ip, "addr", "add", "192.0.2.1/24", "dev", "veth0"},
			{ip, "addr", "add", "192.0.2.2/24", "dev", "veth1"},
			{ip, "link", "set", "veth0", "up"},
			{ip, "link", "set", "veth1", "up"},
			{rdma, "link", "add", "rxe0", "type", "rxe", "netdev", "veth0"},
			{rdma, "link", "add", "rxe1", "type", "rxe", "netdev", "veth1"},
		},
		devices: []string{"rxe0", "rxe1"},
		env:     []string{"RXE_DEVICE=rxe0", "RXE_GID_INDEX=1", "RXE_ADDR=192.0.2.1", "RXE_NETDEV=veth0"},
	}
}

// Two-host mode: host a and host b, each a guest with one virtio NIC on a
// UDP socket on the host's loopback, the two sockets connected to each other
// (pairLink), so each guest's frames go straight to the other. (UDP, not the
// TCP form of -netdev socket, which adds about 40 ms to every small round
// trip; and not network namespaces on one kernel, where rxe's UDP socket
// stays in the initial namespace and QPs never complete.)
var pairHosts = [2]struct {
	name, role, addr, mac string
}{
	{"a", "server", "192.0.2.1", "52:54:00:00:00:01"},
	{"b", "client", "192.0.2.2", "52:54:00:00:00:02"},
}

// pairNIC is the guest's only NIC: the kernel names it, no udev renames it.
const pairNIC = "eth0"

// pairNetwork is host i's side (0 for a, 1 for b) of link: qemu's NIC on
// the link's socket for host i, which qemu inherits as descriptor 3, and
// rxe0 on eth0, with the host's address. GID index 1 is the RoCE v2 GID of it.
func pairNetwork(i int, link pairLink, tools guestTools) network {
	ip, rdma := tools.ip, tools.rdma
	self, peer := pairHosts[i], pairHosts[1-i]
	return network{
		qemuArgs: []string{"-netdev", "dgram,id=n0,local.type=fd,local.str=3",
			"-device", "virtio-net-pci,netdev=n0,mac=" + self.mac + ",romfile="},
		files: []*os.File{link.files[i]},
		setup: [][]string{
			{ip, "addr", "add", self.addr + "/24", "dev", pairNIC},
			{ip, "link", "set", pairNIC, "up"},
			{rdma, "link", "add", "rxe0", "type", "rxe", "netdev", pairNIC},
		},
		devices: []string{"rxe0"},
		env: []string{"RXE_DEVICE=rxe0", "RXE_GID_INDEX=1", "RXE_NETDEV=" + pairNIC,
			"RXE_HOST=" + self.name, "RXE_ROLE=" + self.role, "RXE_ADDR=" + self.addr, "RXE_PEER_ADDR=" + peer.addr},
	}
}

// standardPath is appended to the caller's PATH for the guest command, so
// that a caller with a thin PATH still finds ip, rdma and ibv_devinfo.
var standardPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// guestPath is the PATH the guest command runs with: the caller's absolute
// entries in order, then the standard directories it lacks. Relative entries
// are dropped: they would resolve against a different directory in the guest.
func guestPath(hostPath string) string {
	var dirs []string
	for _, d := range append(filepath.SplitList(hostPath), standardPath...) {
		if filepath.IsAbs(d) && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return strings.Join(dirs, ":")
}

// shellQuote quotes s as one word for a POSIX shell. Words made only of
// characters that no shell treats specially are left bare, for readability.
func shellQuote(s string) string {
	safe := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("_-+./:,@%", r)
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !safe(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellJoin quotes each word and joins them with spaces: the shell splits the
// result back into exactly these words.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

// guestPlan is everything the guest's init does, rendered by initScript.
type guestPlan struct {
	Modules []string // module file names in /lib/modules, in load order
	Workdir string   // host directory shared read-write, also the command's working directory
	Net     network  // links and rxe devices
	Env     []string // KEY=VALUE, the command's whole environment
	Command []string // argv
	Nonce   string   // keeps the command's own output from passing for a marker
}

func (p guestPlan) readyMarker() string { return "rxevm-ready-" + p.Nonce }
func (p guestPlan) exitMarker() string  { return "rxevm-exit-" + p.Nonce + "=" }

// killPeerMarker is the line by which a two-host command asks rxevm to cut
// the other host's power; the command finds it in RXEVM_KILL_PEER.
func (p guestPlan) killPeerMarker() string { return "rxevm-kill-peer-" + p.Nonce }

// commandScript is what the host's /bin/sh runs inside the chroot: raise the
// locked-memory limit (memory registration pins pages), enter the working
// directory, replace itself with the command.
func (p guestPlan) commandScript() string {
	return "ulimit -l unlimited && cd " + shellQuote(p.Workdir) + " && exec " + shellJoin(p.Command)
}

// initData is what the init template sees: plain, precomputed values.
type initData struct {
	Modules     []string
	WorkMount   string // the working directory's mount point under /host
	Setup       [][]string
	Devices     []string
	Env         []string
	Script      string
	ReadyMarker string
	ExitMarker  string
}

var initTemplate = template.Must(template.New("init").Funcs(template.FuncMap{
	"q":    shellQuote,
	"join": shellJoin,
}).Parse(`#!/bin/busybox sh
# PID 1 of a throwaway rxevm guest (rendered by internal/cmd/rxevm).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev

# A failed step says why and powers off without an exit marker.
fail() {
	echo "rxevm: guest setup failed: $*"
	poweroff -f
}
step() {
	"$@" || fail "$*"
}
{{range .Modules}}
step insmod /lib/modules/{{q .}}{{end}}

step mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 hostroot /host
step mount -t proc proc /host/proc
step mount -t sysfs sys /host/sys
step mount -t devtmpfs dev /host/dev
step mkdir -p /host/dev/shm /host/dev/pts
step mount -t tmpfs -o mode=1777 shm /host/dev/shm
step mount -t devpts devpts /host/dev/pts
step mount -t tmpfs -o mode=1777 tmp /host/tmp
step mount -t tmpfs -o mode=755 run /host/run
mkdir -p {{q .WorkMount}} 2>/dev/null
step mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 work {{q .WorkMount}}

step ip link set lo up
{{range .Setup}}step chroot /host {{join .}}
{{end}}
# A port turns ACTIVE shortly after its netdev comes up.
for dev in{{range .Devices}} {{q .}}{{end}}; do
	i=0
	until grep -q ACTIVE /sys/class/infiniband/$dev/ports/1/state 2>/dev/null; do
		i=$((i + 1))
		[ $i -le 100 ] || fail "$dev port 1 is not ACTIVE after 10 s"
		sleep 0.1
	done
done

echo {{q .ReadyMarker}}
chroot /host /usr/bin/env -i {{join .Env}} /bin/sh -c {{q .Script}} </dev/null
echo {{q .ExitMarker}}$?
poweroff -f
`))

// initScript renders the guest's /init.
func initScript(p guestPlan) (string, error) {
	if !filepath.IsAbs(p.Workdir) || filepath.Clean(p.Workdir) == "/" {
		return "", fmt.Errorf("working directory %q: must be absolute and not /", p.Workdir)
	}
	if len(p.Command) == 0 {
		return "", fmt.Errorf("no command to run")
	}
	var b strings.Builder
	err := initTemplate.Execute(&b, initData{
		Modules:     p.Modules,
		WorkMount:   "/host" + filepath.Clean(p.Workdir),
		Setup:       p.Net.setup,
		Devices:     p.Net.devices,
		Env:         p.Env,
		Script:      p.commandScript(),
		ReadyMarker: p.readyMarker(),
		ExitMarker:  p.exitMarker(),
	})
	if err != nil {
		return "", err
	}
	return b.String(), nil
}
