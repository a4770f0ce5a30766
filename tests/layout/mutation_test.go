package layout

// These tests use the standard library only: users run this package from
// their own module (docs/design.md, "The layout proof": go test github.com/goverbs/goverbs/tests/layout),
// whose go.sum has no entry for a module only this package's tests import.

import (
	"slices"
	"structs"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/tests/layoutcheck"
)

// wrongWC is struct ibv_wc with vendor_err left out, the kind of mistake a
// hand-written binding makes: every member after it lands 4 bytes early.
type wrongWC struct {
	_         structs.HostLayout
	WRID      uint64
	Status    uint32
	Opcode    uint32
	ByteLen   uint32
	ImmData   uint32
	QPNum     uint32
	SrcQP     uint32
	WCFlags   uint32
	PKeyIndex uint16
	SLID      uint16
	SL        uint8
	DLID      uint8
}

// TestWrongLayoutIsCaught replaces the Go rows of struct ibv_wc with those
// of wrongWC and requires the comparison with gcc to name every moved member.
func TestWrongLayoutIsCaught(t *testing.T) {
	var w wrongWC
	wrong := map[string]uint64{
		"sizeof(struct ibv_wc)":                   uint64(unsafe.Sizeof(w)), // still 48: tail padding hides the loss
		"offsetof(struct ibv_wc, byte_len)":       uint64(unsafe.Offsetof(w.ByteLen)),
		"offsetof(struct ibv_wc, qp_num)":         uint64(unsafe.Offsetof(w.QPNum)),
		"offsetof(struct ibv_wc, dlid_path_bits)": uint64(unsafe.Offsetof(w.DLID)),
	}
	rows := mutated(t, wrong)
	diff := layoutcheck.Diff(CRows(), rows)
	// The size matches, so only the offsets can catch this mistake.
	want := []string{
		"offsetof(struct ibv_wc, byte_len): C says 20, Go says 16",
		"offsetof(struct ibv_wc, dlid_path_bits): C says 45, Go says 41",
		"offsetof(struct ibv_wc, qp_num): C says 28, Go says 24",
	}
	if !slices.Equal(diff, want) {
		t.Errorf("Diff = %q, want %q", diff, want)
	}
}

// TestWrongSignIsCaught gives enum ibv_wc_status and the macro
// IBV_ACCESS_OPTIONAL_RANGE Go types of the other signedness (as verbsgen did
// to the macros that name an enumerator: uint32, where gcc's is int). Their
// values keep the same bits, so only the sign rows can catch it.
func TestWrongSignIsCaught(t *testing.T) {
	type wrongWCStatus int32 // gcc's enum ibv_wc_status is unsigned int
	wrong := map[string]uint64{
		"signed(enum ibv_wc_status)":              layoutcheck.Signed(wrongWCStatus(0)),
		"enum IBV_WC_GENERAL_ERR":                 layoutcheck.Int(wrongWCStatus(verbs.WCGeneralErr)),
		"signed(macro IBV_ACCESS_OPTIONAL_RANGE)": layoutcheck.Signed(uint32(verbs.AccessOptionalRange)),
		"macro IBV_ACCESS_OPTIONAL_RANGE":         layoutcheck.Int(uint32(verbs.AccessOptionalRange)),
	}
	rows := mutated(t, wrong)
	want := []string{
		"signed(enum ibv_wc_status): C says 0, Go says 1",
		"signed(macro IBV_ACCESS_OPTIONAL_RANGE): C says 1, Go says 0",
	}
	if diff := layoutcheck.Diff(CRows(), rows); !slices.Equal(diff, want) {
		t.Errorf("Diff = %q, want %q", diff, want)
	}
}

// wrongSendWR is struct ibv_send_wr's head with wr_id narrowed to 32 bits,
// as a binding written for other headers might have it: next, a pointer,
// stays at 8, so no offset and not the record's size moves.
type wrongSendWR struct {
	_    structs.HostLayout
	WRID uint32
	_    [4]byte
	Next unsafe.Pointer
	Rest [unsafe.Sizeof(verbs.SendWR{}) - 16]byte // sg_list onwards, unchanged
}

// TestWrongMemberTypeIsCaught gives struct ibv_send_wr's wr_id the width of
// wrongSendWR's and struct ibv_wc's vendor_err a signed type: every offset
// and size of the records still matches, so only the member rows can catch
// them, and they must name the record and member.
func TestWrongMemberTypeIsCaught(t *testing.T) {
	var w wrongSendWR
	if unsafe.Sizeof(w) != unsafe.Sizeof(verbs.SendWR{}) || unsafe.Offsetof(w.Next) != unsafe.Offsetof(verbs.SendWR{}.Next) {
		t.Fatal("wrongSendWR moved more than wr_id's type")
	}
	var wc verbs.WC
	wrong := map[string]uint64{
		"membersize(struct ibv_send_wr, wr_id)":   uint64(unsafe.Sizeof(w.WRID)),
		"membersigned(struct ibv_wc, vendor_err)": layoutcheck.Signed(int32(wc.VendorErr)),
	}
	rows := mutated(t, wrong)
	want := []string{
		"membersigned(struct ibv_wc, vendor_err): C says 0, Go says 1",
		"membersize(struct ibv_send_wr, wr_id): C says 8, Go says 4",
	}
	if diff := layoutcheck.Diff(CRows(), rows); !slices.Equal(diff, want) {
		t.Errorf("Diff = %q, want %q", diff, want)
	}
}

// TestMissingRowIsCaught drops a row from one side: a member the Go side
// forgot must not pass silently.
func TestMissingRowIsCaught(t *testing.T) {
	rows := GoRows()
	var kept []layoutcheck.Row
	for _, r := range rows {
		if r.Key != "offsetof(struct ibv_send_wr, imm_data)" {
			kept = append(kept, r)
		}
	}
	if len(kept) != len(rows)-1 {
		t.Fatal("no row offsetof(struct ibv_send_wr, imm_data) to drop")
	}
	want := []string{"offsetof(struct ibv_send_wr, imm_data): C has 36, Go has no such row"}
	if diff := layoutcheck.Diff(CRows(), kept); !slices.Equal(diff, want) {
		t.Errorf("Diff = %q, want %q", diff, want)
	}
}

// TestGeneratedWC spot-checks one generated type by hand, so that a
// generator bug that fooled both tables the same way would still show here.
func TestGeneratedWC(t *testing.T) {
	var wc verbs.WC
	if s := unsafe.Sizeof(wc); s != 48 {
		t.Errorf("sizeof WC = %d, want 48", s)
	}
	if o := unsafe.Offsetof(wc.ImmData); o != 24 {
		t.Errorf("offsetof WC.ImmData = %d, want 24", o)
	}
	if unsafe.Pointer(&wc.ImmData) != unsafe.Pointer(wc.InvalidatedRKey()) {
		t.Error("WC.InvalidatedRKey does not point at ImmData, its union's other member")
	}
	var wr verbs.SendWR
	if o := unsafe.Offsetof(wr.WR); o != 40 {
		t.Errorf("offsetof SendWR.WR = %d, want 40", o)
	}
	if unsafe.Pointer(&wr.WR) != unsafe.Pointer(wr.WR.RDMA()) || unsafe.Pointer(&wr.WR) != unsafe.Pointer(wr.WR.UD()) {
		t.Error("SendWR.WR.RDMA and UD do not point at the union WR")
	}
}

// mutated is GoRows with each row that wrong names given wrong's value; the
// test fails unless every one of them is in the Go table.
func mutated(t *testing.T, wrong map[string]uint64) []layoutcheck.Row {
	t.Helper()
	rows := GoRows()
	n := 0
	for i, r := range rows {
		if v, ok := wrong[r.Key]; ok {
			rows[i].Value = v
			n++
		}
	}
	if n != len(wrong) {
		t.Fatalf("%d of the %d rows to mutate are in the Go table", n, len(wrong))
	}
	return rows
}
