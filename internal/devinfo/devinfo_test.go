package devinfo

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// Lines as ibv_devinfo 44.0 prints them, tabs included.
func TestTabs(t *testing.T) {
	for _, c := range []struct {
		key    string
		indent int
		want   string
	}{
		{"transport", 1, "\t\t\t"},
		{"fw_ver", 1, "\t\t\t\t"},
		{"device_cap_flags", 1, "\t\t"},
		{"max_total_mcast_qp_attach", 1, "\t"},
		{"state", 3, "\t\t\t"},
		{"max_mtu", 3, "\t\t"},
		{"port_cap_flags2", 3, "\t"},
		{"GID[  1]", 3, "\t\t"},
	} {
		if got := tabs(c.key, c.indent); got != c.want {
			t.Errorf("tabs(%q, %d) = %q, want %q", c.key, c.indent, got, c.want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	cfg, err := ParseArgs([]string{"-d", "rxe0", "--verbose", "-i", "1"})
	if err != nil || cfg != (Config{Device: "rxe0", Port: 1, Verbose: true}) {
		t.Errorf("ParseArgs = %+v, %v", cfg, err)
	}
	// ibv_devinfo's getopt_long forms (package getopt).
	for _, c := range []struct {
		args []string
		want Config
	}{
		{[]string{"-lv"}, Config{List: true, Verbose: true}},
		{[]string{"-vdrxe0", "-i1"}, Config{Device: "rxe0", Port: 1, Verbose: true}},
		{[]string{"--verb", "--ib-d=rxe0", "--ib-p", "2"}, Config{Device: "rxe0", Port: 2, Verbose: true}},
		{[]string{"-list", "-ib-dev", "rxe0"}, Config{Device: "rxe0", List: true}}, // the flag package's forms stand
	} {
		if cfg, err := ParseArgs(c.args); err != nil || cfg != c.want {
			t.Errorf("ParseArgs(%q) = %+v, %v; want %+v", c.args, cfg, err, c.want)
		}
	}
	if _, err := ParseArgs([]string{"--ib", "1"}); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("ParseArgs(--ib 1): %v; want it refused as ambiguous (--ib-dev, --ib-port)", err)
	}
	if _, err := ParseArgs([]string{"extra"}); err == nil {
		t.Error("ParseArgs(extra): want an error")
	}
}

func TestGUID(t *testing.T) {
	if g := guid(0xb20875fffe5fb85e); g != "b208:75ff:fe5f:b85e" {
		t.Errorf("guid = %q", g)
	}
}

// GID lines as ibv_devinfo 44.0's print_formated_gid writes them: raw
// groups for IB and RoCE v1, inet_ntop's text for RoCE v2, the type only on
// an Ethernet port, nothing for a GID with a zero interface ID.
func TestGIDText(t *testing.T) {
	ib := hand.GID{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0xb2, 0x08, 0x75, 0xff, 0xfe, 0x5f, 0xb8, 0x5e}
	v4 := hand.GIDFromAddr(netip.MustParseAddr("192.0.2.1"))
	for _, c := range []struct {
		gid  hand.GID
		typ  hand.GIDType
		ll   uint32
		want string // "" for no line
	}{
		{ib, hand.GIDTypeIB, verbs.LinkLayerInfiniband, "fe80:0000:0000:0000:b208:75ff:fe5f:b85e"},
		{ib, hand.GIDTypeIB, verbs.LinkLayerUnspecified, "fe80:0000:0000:0000:b208:75ff:fe5f:b85e"},
		{ib, hand.GIDTypeRoCEv1, verbs.LinkLayerEthernet, "fe80:0000:0000:0000:b208:75ff:fe5f:b85e, RoCE v1"},
		{ib, hand.GIDTypeRoCEv2, verbs.LinkLayerEthernet, "fe80::b208:75ff:fe5f:b85e, RoCE v2"},
		{v4, hand.GIDTypeRoCEv1, verbs.LinkLayerEthernet, "0000:0000:0000:0000:0000:ffff:c000:0201, RoCE v1"},
		{v4, hand.GIDTypeRoCEv2, verbs.LinkLayerEthernet, "::ffff:192.0.2.1, RoCE v2"},
		{hand.GID{15: 1, 12: 0xc0}, hand.GIDTypeRoCEv2, verbs.LinkLayerEthernet, "::192.0.0.1, RoCE v2"},
		{hand.GID{15: 1}, hand.GIDTypeRoCEv2, verbs.LinkLayerEthernet, "::1, RoCE v2"},
		{hand.GID{0: 0x20, 1: 0x01, 2: 0x0d, 3: 0xb8}, hand.GIDTypeRoCEv2, verbs.LinkLayerEthernet, ""},
		{ib, hand.GIDType(7), verbs.LinkLayerEthernet, ""},
	} {
		got, ok := gidText(c.gid, c.typ, uint8(c.ll))
		if c.want == "" && ok || c.want != "" && got != c.want {
			t.Errorf("gidText(%s, %v, link layer %d) = %q, %v; want %q", c.gid, c.typ, c.ll, got, ok, c.want)
		}
	}
}

func TestLinkLayerName(t *testing.T) {
	for ll, want := range map[uint32]string{verbs.LinkLayerUnspecified: "Unspecified", verbs.LinkLayerInfiniband: "InfiniBand",
		verbs.LinkLayerEthernet: "Ethernet", 7: "Unknown"} {
		if got := linkLayerName(uint8(ll)); got != want {
			t.Errorf("linkLayerName(%d) = %q, want %q", ll, got, want)
		}
	}
}
