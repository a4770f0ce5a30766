package cross

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

// The environment contract, outside the VMs: a complete environment
// parses; every missing or invalid variable is named.
func TestHostFromEnv(t *testing.T) {
	env := map[string]string{
		"RXE_HOST": "b", "RXE_ROLE": "client", "RXE_ADDR": "192.0.2.2", "RXE_PEER_ADDR": "192.0.2.1",
		"RXE_DEVICE": "rxe0", "RXE_GID_INDEX": "1", "RXE_NETDEV": "eth0",
	}
	h, err := hostFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := Host{Name: "b", Role: Client, Addr: netip.MustParseAddr("192.0.2.2"), PeerAddr: netip.MustParseAddr("192.0.2.1"),
		Device: "rxe0", GIDIndex: 1, Netdev: "eth0"}
	if h != want {
		t.Errorf("hostFromEnv = %+v, want %+v", h, want)
	}
	if h.IsServer() || h.PeerRole() != Server || h.ServerAddr() != want.PeerAddr {
		t.Errorf("client host: IsServer %v, PeerRole %s, ServerAddr %v", h.IsServer(), h.PeerRole(), h.ServerAddr())
	}

	env["RXE_ROLE"], env["RXE_ADDR"], env["RXE_GID_INDEX"] = "both", "::1", "x"
	delete(env, "RXE_NETDEV")
	_, err = hostFromEnv(func(k string) string { return env[k] })
	for _, s := range []string{`RXE_ROLE="both"`, `RXE_ADDR="::1" is not an IPv4`, `RXE_GID_INDEX="x"`, "RXE_NETDEV is not set"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("hostFromEnv with bad variables: %v; want it to say %s", err, s)
		}
	}
}

// Fill is what both hosts recompute: the same for a seed, different across
// seeds and along the buffer.
func TestFill(t *testing.T) {
	a, b, c := make([]byte, 4096), make([]byte, 4096), make([]byte, 4096)
	Fill(a, 7)
	Fill(b, 7)
	Fill(c, 8)
	if !bytes.Equal(a, b) || bytes.Equal(a, c) || bytes.Equal(a[:2048], a[2048:]) {
		t.Errorf("Fill is not a per-seed pattern")
	}
	if Sum(a) != Sum(b) || Sum(a) == Sum(c) || len(Sum(a)) != 64 {
		t.Errorf("Sum: %s %s %s", Sum(a), Sum(b), Sum(c))
	}
}
