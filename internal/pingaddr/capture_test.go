package pingaddr

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The captured runs (testdata/README.md says how they were made): rdma-core
// 33.2, 44.0 and 65.0, four tools each.
var (
	captureVersions = []string{"33.2", "44.0", "65.0"}
	captureTools    = []string{"rc", "uc", "ud", "srq"}
)

// printed matches an address line as the tools print it; ud_pingpong
// prints its own with ": GID" where the others have ", GID".
var printed = regexp.MustCompile(`(?m)^  (local|remote) address: +LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6})[,:] GID (\S+)$`)

// addresses returns the local and remote addresses a tool printed.
func addresses(t *testing.T, out string) (local, remote []Dest) {
	t.Helper()
	for _, m := range printed.FindAllStringSubmatch(out, -1) {
		var n [3]uint64
		for i := range n {
			n[i], _ = strconv.ParseUint(m[2+i], 16, 32)
		}
		a, err := netip.ParseAddr(m[5])
		if err != nil {
			t.Fatalf("printed GID %q: %v", m[5], err)
		}
		d := Dest{LID: uint16(n[0]), QPN: uint32(n[1]), PSN: uint32(n[2]), GID: GID(a.As16())}
		if m[1] == "local" {
			local = append(local, d)
		} else {
			remote = append(remote, d)
		}
	}
	return local, remote
}

func readCapture(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every captured stream parses; what each tool sent is what it printed as
// its local address(es) and what its peer printed as remote; the values
// are plausible for rxe0 in the VM; and marshalling them again gives the
// captured bytes exactly, zero lines and done included.
func TestCapturedC(t *testing.T) {
	for _, v := range captureVersions {
		dir := filepath.Join("testdata", "rdma-core-"+v)
		if got := string(readCapture(t, dir, "VERSION")); !strings.Contains(got, "ibverbs-utils "+v) {
			t.Errorf("%s/VERSION = %q, want ibverbs-utils %s", dir, got, v)
		}
		for _, tool := range captureTools {
			t.Run(v+"/"+tool, func(t *testing.T) { checkCapture(t, dir, tool) })
		}
	}
}

func checkCapture(t *testing.T, dir, tool string) {
	srq := tool == "srq"
	nQP := 1
	if srq {
		nQP = 4 // -q 4
	}
	sent := map[string][]Dest{}
	for _, side := range []string{"client", "server"} {
		raw := readCapture(t, dir, tool+"."+side)
		r := NewReader(bytes.NewReader(raw))
		var ds []Dest
		var err error
		if srq {
			ds, err = r.ReadSRQ()
		} else {
			ds, err = r.ReadDests(1)
		}
		if err != nil {
			t.Fatalf("%s: %v", side, err)
		}
		if side == "client" {
			if err := r.ReadDone(); err != nil {
				t.Fatalf("client: %v", err)
			}
		}
		lines := len(ds)
		if srq {
			lines = SRQLines
		}
		if rest := len(raw) - Size*lines; side == "client" && rest != len(Done) || side == "server" && rest != 0 {
			t.Errorf("%s sent %d bytes: %d lines of %d and %d more", side, len(raw), lines, Size, rest)
		}
		if len(ds) != nQP {
			t.Fatalf("%s sent %d addresses, want %d", side, len(ds), nQP)
		}
		for _, d := range ds {
			if d.QPN < 2 || d.LID != 0 || d.GID != rxeGID {
				t.Errorf("%s sent %v: want a QPN past QP1, LID 0 (RoCE) and rxe0's GID %v", side, d, rxeGID)
			}
		}
		sent[side] = ds

		var again bytes.Buffer
		w := NewWriter(&again)
		if srq {
			err = w.WriteSRQ(ds)
		} else {
			err = w.WriteDests(ds)
		}
		if err == nil && side == "client" {
			err = w.WriteDone()
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), raw) {
			t.Errorf("%s: marshalled again, %d bytes differ from the %d captured:\n%q\n%q",
				side, len(again.Bytes()), len(raw), again.Bytes()[:min(again.Len(), 2*Size)], raw[:min(len(raw), 2*Size)])
		}
	}
	for _, side := range []string{"client", "server"} {
		out := string(readCapture(t, dir, tool+"."+side+".printed"))
		if !strings.HasSuffix(out, "exit status 0\n") {
			t.Errorf("the %s's run did not succeed:\n%s", side, out)
		}
		peer := map[string]string{"client": "server", "server": "client"}[side]
		local, remote := addresses(t, out)
		if !slices.Equal(local, sent[side]) || !slices.Equal(remote, sent[peer]) {
			t.Errorf("%s printed local %v, remote %v; the wire had %v from it, %v from the %s",
				side, local, remote, sent[side], sent[peer], peer)
		}
	}
}
