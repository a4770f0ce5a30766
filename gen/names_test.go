package gen

import "testing"

// InfiniBand's keys read as hand spells them, in names and parameters.
func TestKeyInitialisms(t *testing.T) {
	for c, want := range map[string]string{
		"lkey": "LKey", "rkey": "RKey", "remote_qkey": "RemoteQKey", "pkey_index": "PKeyIndex",
		"max_pkeys": "MaxPKeys", "IBV_QP_QKEY": "QPQKey", "keymat": "Keymat", "qp_num": "QPNum",
	} {
		if got := GoName(c, []Prefix{{"IBV_", ""}}); got != want {
			t.Errorf("GoName(%q) = %q, want %q", c, got, want)
		}
	}
	for c, want := range map[string]string{
		"rkey": "rkey", "pkey_index": "pkeyIndex", "invalidate_rkey": "invalidateRKey",
		"ipv4_addr": "ipv4Addr", "qp_num": "qpNum", "context": "context",
	} {
		if got := paramName(c, 0); got != want {
			t.Errorf("paramName(%q) = %q, want %q", c, got, want)
		}
	}
}
