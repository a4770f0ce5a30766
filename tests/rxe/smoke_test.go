package rxe

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// devinfoPort is what the smoke test reads from `ibv_devinfo -d DEV -v`.
type devinfoPort struct {
	hcaID string
	state string // "PORT_ACTIVE (4)"
	gids  map[int]string
}

var (
	hcaIDLine = regexp.MustCompile(`(?m)^hca_id:\s*(\S+)$`)
	stateLine = regexp.MustCompile(`(?m)^\s+state:\s*(.+?)\s*$`)
	gidLine   = regexp.MustCompile(`(?m)^\s+GID\[\s*(\d+)\]:\s*([^,\s]+)`)
)

// parseDevinfo reads the first port of ibv_devinfo -v output.
func parseDevinfo(out string) devinfoPort {
	var p devinfoPort
	if m := hcaIDLine.FindStringSubmatch(out); m != nil {
		p.hcaID = m[1]
	}
	if m := stateLine.FindStringSubmatch(out); m != nil {
		p.state = m[1]
	}
	p.gids = map[int]string{}
	for _, m := range gidLine.FindAllStringSubmatch(out, -1) {
		i, _ := strconv.Atoi(m[1]) // \d+
		p.gids[i] = m[2]
	}
	return p
}

// rdmaLinkState returns the state `rdma link` gives for port 1 of device.
func rdmaLinkState(out, device string) (state string, ok bool) {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "link" && f[1] == device+"/1" && f[2] == "state" {
			return f[3], true
		}
	}
	return "", false
}

const devinfoSample = `hca_id:	rxe0
	transport:			InfiniBand (0)
	phys_port_cnt:			1
		port:	1
			state:			PORT_ACTIVE (4)
			max_mtu:		4096 (5)
			link_layer:		Ethernet
			GID[  0]:		fe80::24a4:3aff:fe5a:a8b7, RoCE v2
			GID[  1]:		::ffff:192.0.2.1, RoCE v2

`

// The parsers run everywhere, on the output the VM's tools print.
func TestParseDevinfo(t *testing.T) {
	p := parseDevinfo(devinfoSample)
	if p.hcaID != "rxe0" || p.state != "PORT_ACTIVE (4)" || p.gids[0] != "fe80::24a4:3aff:fe5a:a8b7" || p.gids[1] != "::ffff:192.0.2.1" {
		t.Errorf("parseDevinfo = %+v", p)
	}
	if p := parseDevinfo("No IB devices found\n"); p.hcaID != "" || len(p.gids) != 0 {
		t.Errorf("parseDevinfo(no devices) = %+v", p)
	}
}

func TestRDMALinkState(t *testing.T) {
	out := "link rxe0/1 state ACTIVE physical_state LINK_UP netdev veth0 \nlink rxe1/1 state DOWN physical_state DISABLED netdev veth1 \n"
	for dev, want := range map[string]string{"rxe0": "ACTIVE", "rxe1": "DOWN", "rxe": ""} {
		if got, ok := rdmaLinkState(out, dev); got != want || ok != (want != "") {
			t.Errorf("rdmaLinkState(%s) = %q, %v; want %q", dev, got, ok, want)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestSoftRoCEDevice checks the device the VM promises: present, its port
// active, and the RoCE v2 GID at the promised index mapping the promised
// IPv4 address.
func TestSoftRoCEDevice(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	addr := os.Getenv("RXE_ADDR")
	if addr == "" {
		t.Fatal("RXE_ADDR is not set: run under internal/cmd/rxevm, which sets it")
	}

	p := parseDevinfo(run(t, "ibv_devinfo", "-d", device, "-v"))
	if p.hcaID != device {
		t.Errorf("ibv_devinfo -d %s lists hca_id %q", device, p.hcaID)
	}
	if !strings.HasPrefix(p.state, "PORT_ACTIVE") {
		t.Errorf("%s port 1 state %q, want PORT_ACTIVE", device, p.state)
	}
	if want := "::ffff:" + addr; p.gids[gidIndex] != want {
		t.Errorf("%s GID[%d] = %q, want %s (RoCE v2 GID of %s)", device, gidIndex, p.gids[gidIndex], want, addr)
	}

	if state, ok := rdmaLinkState(run(t, "rdma", "link"), device); !ok || state != "ACTIVE" {
		t.Errorf("rdma link: %s/1 state %q (listed %v), want ACTIVE", device, state, ok)
	}
}
