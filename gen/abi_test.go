package gen_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// growthIR loads one of the header sets in testdata/growth.
func growthIR(t *testing.T, set string) *gen.IR {
	t.Helper()
	return modelOf(t, filepath.Join("testdata", "growth", set), []string{"infiniband/verbs.h"})
}

func violations(rep *gen.GrowthReport) []string {
	var out []string
	for _, v := range rep.Violations {
		out = append(out, v.String())
	}
	return out
}

// TestGrowth checks each testdata/growth header set, as release 2.0, against
// testdata/growth/old, as release 1.0: growing at the end (and, for
// verbs_context, at the front) passes; moving, resizing or dropping a member,
// shrinking or dropping a record, renumbering an enumerator, or growing
// verbs_context after its anchor is caught, with a message naming the
// record, the member, both releases and both offsets.
func TestGrowth(t *testing.T) {
	old := growthIR(t, "old")
	for _, tc := range []struct {
		set     string
		members int      // members of old compared: those of records missing in set are not
		want    []string // every violation, in the report's order
		reused  []string // every reserved member reused (GrowthReport.Reused)
	}{
		{"old", 27, nil, nil},
		{"grown", 27, nil, []string{
			"struct ibv_port_resp_ex: reserved member reserved shrank from 6 bytes at 10 (rdma-core 1.0) to 2 at 10 (rdma-core 2.0): bytes 12..15 now hold speed_ex (at 12)",
		}},
		{"moved", 27, []string{
			"enumerator IBV_MTU_256: value changed from 1 (rdma-core 1.0) to 2 (rdma-core 2.0)",
			"enumerator IBV_MTU_512: value changed from 2 (rdma-core 1.0) to 3 (rdma-core 2.0)",
			"struct ibv_port_attr: member active_width moved from 10 (rdma-core 1.0) to 11 (rdma-core 2.0)",
			"struct ibv_port_attr: member active_speed moved from 11 (rdma-core 1.0) to 12 (rdma-core 2.0)",
			"struct ibv_port_resp_ex: member reserved moved from 10 (rdma-core 1.0) to 16 (rdma-core 2.0)",
			"struct ibv_send_wr: member wr.rdma.rkey moved from 16 (rdma-core 1.0) to 20 (rdma-core 2.0)",
			"struct ibv_wc: member imm_data (at 8) changed size from 4 (rdma-core 1.0) to 8 (rdma-core 2.0)",
			"struct ibv_wc: member pkey_index moved from 12 (rdma-core 1.0) to 16 (rdma-core 2.0)",
		}, nil},
		{"shrunk", 18, []string{
			"struct ibv_port_attr: size shrank from 12 (rdma-core 1.0) to 8 (rdma-core 2.0)",
			"struct ibv_port_attr: member lid (at 8 in rdma-core 1.0) is missing in rdma-core 2.0",
			"struct ibv_port_attr: member active_width (at 10 in rdma-core 1.0) is missing in rdma-core 2.0",
			"struct ibv_port_attr: member active_speed (at 11 in rdma-core 1.0) is missing in rdma-core 2.0",
			"struct ibv_send_wr: defined in rdma-core 1.0 (size 32), missing in rdma-core 2.0",
		}, nil},
		{"front-moved", 27, []string{
			// The new member went in between: what lies in front of it moved relative to context.
			"struct verbs_context: member query_port moved from -24 (rdma-core 1.0) to -32 (rdma-core 2.0), relative to member context",
			"struct verbs_context: member priv moved from -16 (rdma-core 1.0) to -24 (rdma-core 2.0), relative to member context",
		}, nil},
		{"front-tail", 27, []string{
			"struct verbs_context: grows at its front, anchored at member context: member after_the_anchor follows the anchor in rdma-core 2.0 but not in rdma-core 1.0: members may only be added in front of the anchor",
		}, nil},
	} {
		t.Run(tc.set, func(t *testing.T) {
			rep := gen.CheckGrowth(old, growthIR(t, tc.set), "1.0", "2.0")
			t.Log(rep)
			for _, v := range rep.Violations {
				t.Log(v)
			}
			for _, v := range rep.Reused {
				t.Log("reused: ", v)
			}
			if rep.Records != 6 || rep.FrontGrowing != 1 || rep.Enumerators != 2 {
				t.Errorf("compared %d records (%d front-growing), %d enumerators; want 6 (1), 2", rep.Records, rep.FrontGrowing, rep.Enumerators)
			}
			// In old: ibv_context 2, ibv_port_attr 5, ibv_wc 4 (the anonymous
			// union's two included), ibv_send_wr 9 (wr_id, wr, wr.rdma and its
			// 2, wr.ud and its 2, num_sge), verbs_context 4, ibv_port_resp_ex 3.
			if rep.Members != tc.members {
				t.Errorf("compared %d members, want %d", rep.Members, tc.members)
			}
			got := violations(rep)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			var reused []string
			for _, v := range rep.Reused {
				reused = append(reused, v.String())
			}
			if strings.Join(reused, "\n") != strings.Join(tc.reused, "\n") {
				t.Errorf("reserved members reused:\n%s\nwant:\n%s", strings.Join(reused, "\n"), strings.Join(tc.reused, "\n"))
			}
		})
	}
}

// TestGrowthFrontTable: without verbs_context in the front-growing table,
// its growth at the front is what it would be for any other struct, every
// old member moved; with another record in the table, that record is
// compared relative to its anchor, and a missing anchor is reported.
func TestGrowthFrontTable(t *testing.T) {
	old, grown := growthIR(t, "old"), growthIR(t, "grown")

	rep := gen.CheckGrowthFront(old, grown, "1.0", "2.0", nil)
	got := strings.Join(violations(rep), "\n")
	for _, want := range []string{
		"struct verbs_context: member query_port moved from 0 (rdma-core 1.0) to 16 (rdma-core 2.0)",
		"struct verbs_context: member context moved from 24 (rdma-core 1.0) to 40 (rdma-core 2.0)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("without the table, missing %q in:\n%s", want, got)
		}
	}

	// ibv_send_wr anchored at num_sge: wr_id and wr keep their offsets
	// relative to it, and the new send_flags follows it.
	rep = gen.CheckGrowthFront(old, grown, "1.0", "2.0", map[string]string{"struct ibv_send_wr": "num_sge"})
	got = strings.Join(violations(rep), "\n")
	for _, want := range []string{
		"struct ibv_send_wr: grows at its front, anchored at member num_sge: member send_flags follows the anchor in rdma-core 2.0 but not in rdma-core 1.0",
		"struct verbs_context: member query_port moved from 0 (rdma-core 1.0) to 16 (rdma-core 2.0)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("anchored at num_sge, missing %q in:\n%s", want, got)
		}
	}
	if rep.FrontGrowing != 1 {
		t.Errorf("%d records compared relative to an anchor, want 1", rep.FrontGrowing)
	}

	rep = gen.CheckGrowthFront(old, grown, "1.0", "2.0", map[string]string{"struct ibv_wc": "no_such_member"})
	got = strings.Join(violations(rep), "\n")
	if want := "struct ibv_wc: grows at its front, anchored at member no_such_member: the anchor is not a top-level member in rdma-core 1.0"; !strings.Contains(got, want) {
		t.Errorf("missing %q in:\n%s", want, got)
	}
}

// TestGrowthVersions: the releases default to the IRs' Version fields.
func TestGrowthVersions(t *testing.T) {
	old, moved := growthIR(t, "old"), growthIR(t, "moved")
	old.Version, moved.Version = "44.0", "65.0"
	rep := gen.CheckGrowth(old, moved, "", "")
	got := strings.Join(violations(rep), "\n")
	if want := "struct ibv_port_attr: member active_width moved from 10 (rdma-core 44.0) to 11 (rdma-core 65.0)"; !strings.Contains(got, want) {
		t.Errorf("missing %q in:\n%s", want, got)
	}
	if !strings.HasPrefix(rep.String(), "rdma-core 44.0 -> rdma-core 65.0: 6 records") {
		t.Errorf("summary %q", rep.String())
	}
}

// TestGrowthReserved: new members may take over reserved bytes (the kernel
// and rdma-core extend fixed-size structures that way): the reserved member
// vanishes, or keeps a part of its bytes, and the reuse is listed, not
// reported as a violation. Anything else about it is a violation.
func TestGrowthReserved(t *testing.T) {
	header := func(body string) map[string]string {
		return map[string]string{"infiniband/verbs.h": "#include <stdint.h>\nstruct ibv_resp {\n\tuint64_t legacy;\n" + body + "};\n"}
	}
	old := header("\tuint16_t flags;\n\tuint8_t reserved[6];\n")
	for _, tc := range []struct {
		name, body       string
		violation, reuse string // substrings of the only one expected; "" for none
	}{
		{"tail carved", "\tuint16_t flags;\n\tuint8_t reserved[2];\n\tuint32_t speed;\n", "",
			"reserved member reserved shrank from 6 bytes at 10 (rdma-core 1.0) to 2 at 10 (rdma-core 2.0): bytes 12..15 now hold speed (at 12)"},
		{"front carved", "\tuint16_t flags;\n\tuint16_t more;\n\tuint8_t reserved[4];\n", "",
			"reserved member reserved shrank from 6 bytes at 10 (rdma-core 1.0) to 4 at 12 (rdma-core 2.0): bytes 10..11 now hold more (at 10)"},
		{"replaced", "\tuint16_t flags;\n\tuint16_t more;\n\tuint32_t speed;\n", "",
			"reserved member reserved (at 10, 6 bytes in rdma-core 1.0) is gone in rdma-core 2.0: bytes 10..15 now hold more (at 10), speed (at 12)"},
		{"left as padding", "\tuint16_t flags;\n\tuint8_t reserved[2];\n", "",
			"bytes 12..15 are now padding"},
		{"pushed past its end", "\tuint16_t flags;\n\tuint32_t more;\n\tuint8_t reserved[2];\n",
			"struct ibv_resp: member reserved moved from 10 (rdma-core 1.0) to 16 (rdma-core 2.0)", ""},
		{"grown", "\tuint16_t flags;\n\tuint8_t reserved[14];\n",
			"struct ibv_resp: member reserved (at 10) changed size from 6 (rdma-core 1.0) to 14 (rdma-core 2.0)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			load := func(files map[string]string) *gen.IR {
				l, err := gen.Load(includeDir(t, files), []string{"infiniband/verbs.h"})
				if err != nil {
					t.Fatal(err)
				}
				ir, err := gen.Model(l)
				if err != nil {
					t.Fatal(err)
				}
				return ir
			}
			rep := gen.CheckGrowth(load(old), load(header(tc.body)), "1.0", "2.0")
			got, reused := violations(rep), []string{}
			for _, v := range rep.Reused {
				reused = append(reused, v.String())
			}
			check := func(what string, list []string, want string) {
				if want == "" && len(list) == 0 {
					return
				}
				if len(list) != 1 || !strings.Contains(list[0], want) {
					t.Errorf("%s: %q, want one containing %q", what, list, want)
				}
			}
			check("violations", got, tc.violation)
			check("reserved members reused", reused, tc.reuse)
		})
	}
}
