package devinfo

import "testing"

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
	if _, err := ParseArgs([]string{"extra"}); err == nil {
		t.Error("ParseArgs(extra): want an error")
	}
}

func TestGUID(t *testing.T) {
	if g := guid(0xb20875fffe5fb85e); g != "b208:75ff:fe5f:b85e" {
		t.Errorf("guid = %q", g)
	}
}
