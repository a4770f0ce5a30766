package rxe

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/devinfo"
)

// kv is one "key: value" line of ibv_devinfo output.
type kv struct{ key, value string }

// devinfoPairs reads the "key:<tabs>value" lines, in order; lines without
// a value (flag names, section headers) are left out.
func devinfoPairs(out string) []kv {
	var kvs []kv
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":\t")
		if ok && strings.TrimSpace(v) != "" {
			kvs = append(kvs, kv{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return kvs
}

// Every line goverbs-devinfo -v prints must be a line of ibv_devinfo -v, with
// the same value, in the same order; and the key fields must be there.
func TestInteropDevinfo(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	cOut := run(t, "ibv_devinfo", "-d", device, "-v")
	var goOut, goErr bytes.Buffer
	if code := devinfo.Main([]string{"-d", device, "-v"}, &goOut, &goErr); code != 0 {
		t.Fatalf("goverbs-devinfo -d %s -v: exit %d: %s", device, code, goErr.String())
	}
	t.Logf("goverbs-devinfo -d %s -v:\n%s", device, goOut.String())
	got := devinfoPairs(goOut.String())
	have := map[string]bool{}
	for _, p := range got {
		have[p.key] = true
	}
	var want []kv
	for _, p := range devinfoPairs(cOut) {
		if have[p.key] {
			want = append(want, p)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("goverbs-devinfo and ibv_devinfo differ:\n go: %q\n  C: %q\nibv_devinfo output:\n%s", got, want, cOut)
	}
	gidKey := fmt.Sprintf("GID[%3d]", gidIndex)
	for _, k := range []string{"hca_id", "transport", "node_guid", "sys_image_guid", "vendor_id", "phys_port_cnt",
		"max_qp", "max_qp_wr", "device_cap_flags", "max_cqe", "port", "state", "max_mtu", "active_mtu",
		"link_layer", "gid_tbl_len", gidKey} {
		if !have[k] {
			t.Errorf("goverbs-devinfo prints no %q line", k)
		}
	}
	if !strings.Contains(goOut.String(), "::ffff:"+localAddr()+", RoCE v2") {
		t.Errorf("goverbs-devinfo shows no RoCE v2 GID for %s", localAddr())
	}

	// -l lists the same devices.
	goOut.Reset()
	if code := devinfo.Main([]string{"-l"}, &goOut, &goErr); code != 0 || goOut.String() != run(t, "ibv_devinfo", "-l") {
		t.Errorf("goverbs-devinfo -l (exit %d):\n%s\nibv_devinfo -l:\n%s", code, goOut.String(), run(t, "ibv_devinfo", "-l"))
	}
}
