package pingaddr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// rxeGID is rxe0's RoCE v2 IPv4 GID in the soft-RoCE VM (index 1).
var rxeGID = GID(netip.MustParseAddr("::ffff:192.0.2.1").As16())

// A message as ibv_rc_pingpong sends it for rxe0, LID 0, QPN 0x11, PSN
// 0x5d2c1a.
const cMsg = "0000:000011:5d2c1a:00000000000000000000ffffc0000201\x00"

func TestSizes(t *testing.T) {
	if n := len("0000:000000:000000:00000000000000000000000000000000") + 1; Size != n || destLayout.size() != n {
		t.Errorf("Size %d, layout %d, want sizeof the C tools' template, %d", Size, destLayout.size(), n)
	}
	// "%04x:%06x:%06x:%06x:%06x:%32s" filled, and the NUL.
	if n := 4 + 1 + 4*(6+1) + 32 + 1; XSRQSize != n || xsrqLayout.size() != n {
		t.Errorf("XSRQSize %d, layout %d, want %d", XSRQSize, xsrqLayout.size(), n)
	}
	if len(Done) != len("done")+1 || len(End) != len("END")+1 {
		t.Errorf("Done %q, End %q: each is the word and its NUL", Done, End)
	}
}

func TestDest(t *testing.T) {
	want := Dest{QPN: 0x11, PSN: 0x5d2c1a, GID: rxeGID}
	d, err := Parse([]byte(cMsg))
	if err != nil {
		t.Fatal(err)
	}
	if d != want {
		t.Errorf("Parse = %+v, want %+v", d, want)
	}
	b, err := want.Marshal()
	if err != nil || string(b[:]) != cMsg {
		t.Errorf("Marshal = %q, %v; want %q", b, err, cMsg)
	}
	if s, w := want.String(), "LID 0x0000, QPN 0x000011, PSN 0x5d2c1a, GID ::ffff:192.0.2.1"; s != w {
		t.Errorf("String = %q, want %q", s, w)
	}
	if rxeGID.InterfaceID() != 0x0000ffffc0000201 {
		t.Errorf("InterfaceID = %#x", rxeGID.InterfaceID())
	}
	max := Dest{LID: 0xffff, QPN: 0xffffff, PSN: 0xffffff, GID: GID{0: 0xfe, 1: 0x80, 15: 0xff}}
	if b, err := max.Marshal(); err != nil || string(b[:]) != "ffff:ffffff:ffffff:fe8000000000000000000000000000ff\x00" {
		t.Errorf("Marshal(%+v) = %q, %v", max, b, err)
	}
	for _, d := range []Dest{{QPN: 1 << 24}, {PSN: 1 << 24}} {
		if b, err := d.Marshal(); err == nil || !strings.HasPrefix(err.Error(), "pingaddr: ") || b != ([Size]byte{}) {
			t.Errorf("Marshal(%+v) = %q, %v; want no bytes and an error", d, b, err)
		}
	}
}

// GID text as glibc's inet_ntop(AF_INET6) writes it (each want below is
// what glibc 2.36's inet_ntop printed for those 16 bytes): RFC 5952's, but
// for an address of six zero groups and a non-zero seventh, which it writes
// IPv4-compatible, and the IPv4-mapped one.
func TestGIDString(t *testing.T) {
	for _, c := range []struct {
		gid  GID
		want string
	}{
		{GID{12: 192, 14: 2, 15: 1}, "::192.0.2.1"},
		{GID{12: 0xc0}, "::192.0.0.0"},
		{GID{13: 1}, "::0.1.0.0"},
		{rxeGID, "::ffff:192.0.2.1"},
		{GID{10: 0xff, 11: 0xff}, "::ffff:0.0.0.0"},
		{GID{15: 1}, "::1"},                 // the seventh group is zero: not IPv4
		{GID{14: 0x12, 15: 0x34}, "::1234"}, // likewise
		{GID{}, "::"},
		{GID{11: 1, 12: 192, 14: 2, 15: 1}, "::1:c000:201"}, // five zero groups
		{GID{1: 1, 12: 192, 14: 2, 15: 1}, "1::c000:201"},
		{GID{10: 0xff, 11: 0xfe, 12: 192, 14: 2, 15: 1}, "::fffe:c000:201"},
		{GID{5: 1}, "0:0:1::"},
		{GID{0: 0xfe, 1: 0x80, 8: 0xb2, 9: 0x08, 10: 0x75, 11: 0xff, 12: 0xfe, 13: 0x5f, 14: 0xb8, 15: 0x5e}, "fe80::b208:75ff:fe5f:b85e"},
		{GID{0: 0x20, 1: 0x01, 2: 0x0d, 3: 0xb8, 9: 1, 15: 1}, "2001:db8::1:0:0:1"},
	} {
		if got := c.gid.String(); got != c.want {
			t.Errorf("GID(%x).String() = %q, inet_ntop writes %q", c.gid[:], got, c.want)
		}
	}
	d := Dest{QPN: 0x11, PSN: 1, GID: GID{12: 192, 14: 2, 15: 1}}
	if got, want := d.String(), "LID 0x0000, QPN 0x000011, PSN 0x000001, GID ::192.0.2.1"; got != want {
		t.Errorf("Dest.String() = %q, want %q", got, want)
	}
}

// cWireGID is the C tools' gid_to_wire_gid: the GID's 4 words read in the
// host's order, htobe32'd, each printed "%08x".
func cWireGID(g GID) string {
	var s strings.Builder
	for i := range 4 {
		w := binary.NativeEndian.Uint32(g[4*i:])
		var be [4]byte
		binary.BigEndian.PutUint32(be[:], w)
		fmt.Fprintf(&s, "%08x", binary.NativeEndian.Uint32(be[:])) // htobe32(w), printed as a number
	}
	return s.String()
}

// The wire GID is the bytes in order on a little-endian host as on a big
// one: htobe32 cancels the host order of the word load.
func TestWireGIDOrder(t *testing.T) {
	g := GID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}
	b, err := Dest{GID: g}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if got, c := string(b[19:51]), cWireGID(g); got != c || got != "0123456789abcdeffedcba9876543210" {
		t.Errorf("wire GID %s, the C tools' %s, want the bytes in order", got, c)
	}
}

func TestXSRQDest(t *testing.T) {
	d := XSRQDest{LID: 0x12, RecvQPN: 0x11, SendQPN: 0x12, PSN: 0xabcdef, SRQN: 0x3, GID: rxeGID}
	const want = "0012:000011:000012:abcdef:000003:00000000000000000000ffffc0000201\x00"
	b, err := d.Marshal()
	if err != nil || string(b[:]) != want {
		t.Fatalf("Marshal = %q, %v; want %q", b, err, want)
	}
	got, err := ParseXSRQ(b[:])
	if err != nil || got != d {
		t.Errorf("ParseXSRQ = %+v, %v; want %+v", got, err, d)
	}
	if _, err := (XSRQDest{SRQN: 1 << 24}).Marshal(); err == nil || !strings.Contains(err.Error(), "SRQN") {
		t.Errorf("Marshal with a 25-bit SRQN: %v, want an error naming SRQN", err)
	}
	if _, err := ParseXSRQ([]byte(cMsg)); err == nil {
		t.Error("ParseXSRQ took a Dest message")
	}
}

// Each malformed message is refused with the field and the byte at fault.
func TestParseRejects(t *testing.T) {
	gid := "00000000000000000000ffffc0000201"
	for _, c := range []struct {
		msg    string
		field  string
		offset int
		says   string
	}{
		{"", "", 0, "0 bytes, want 52"},
		{cMsg[:51], "", 0, "51 bytes, want 52"},
		{cMsg + "\x00", "", 0, "53 bytes, want 52"},
		{cMsg[:51] + "0", "", 51, "no NUL"},
		{"0000:000011:5d2c1a:" + gid[:31] + ":\x00", "", 0, "5 fields before the NUL at byte 51, want 4 (LID:QPN:PSN:GID)"},
		{"0000:000011:5d2c1a" + gid + "\x00\x00", "", 0, "3 fields"},
		{"1:11:5d2c1a:" + gid + strings.Repeat("\x00", 8), "LID", 0, "1 hex digits, want 4"},
		{"000:0000011:5d2c1a:" + gid + "\x00", "LID", 0, "3 hex digits, want 4"},
		{"0000:1000000:5d2c1:" + gid + "\x00", "QPN", 5, "7 hex digits, want 6: more than 24 bits"},
		{"0000:000011:5d2c1a0:" + gid[1:] + "\x00", "PSN", 12, "7 hex digits, want 6: more than 24 bits"},
		{"zzzz:000011:5d2c1a:" + gid + "\x00", "LID", 0, "byte 0 is 'z', not a lowercase hex digit"},
		{"0000:00001g:5d2c1a:" + gid + "\x00", "QPN", 10, "byte 10 is 'g'"},
		{"0000:000011:5D2C1A:" + gid + "\x00", "PSN", 13, "byte 13 is 'D', not a lowercase hex digit"},
		{"0000:0x0011:5d2c1a:" + gid + "\x00", "QPN", 6, "byte 6 is 'x'"},
		{"0000: 00011:5d2c1a:" + gid + "\x00", "QPN", 5, "byte 5 is ' '"},
		{"0000:-00011:5d2c1a:" + gid + "\x00", "QPN", 5, "byte 5 is '-'"},
		{"0000:000011:5d2c1a:" + gid[:30] + "\x00\x00\x00", "GID", 19, "30 hex digits before the NUL at byte 49, want 32"},
		{"0000:000011:5d2c1a:" + gid[:16] + "\x00" + gid[17:] + "\x00", "GID", 19, "16 hex digits before the NUL at byte 35"},
		{"0000:000011:5d2c1a:" + gid[:31] + "G\x00", "GID", 50, "byte 50 is 'G'"},
		{"0000:000011:5d2c1a:" + gid[:31] + "\n\x00", "GID", 50, `byte 50 is '\n'`},
	} {
		d, err := Parse([]byte(c.msg))
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %+v, %v; want a *SyntaxError", c.msg, d, err)
			continue
		}
		if se.Field != c.field || se.Offset != c.offset || !strings.Contains(se.Msg, c.says) || se.Line != 0 {
			t.Errorf("Parse(%q): %v (field %q, offset %d, line %d); want field %q, offset %d, saying %q",
				c.msg, err, se.Field, se.Offset, se.Line, c.field, c.offset, c.says)
		}
	}
}

func TestSyntaxErrorText(t *testing.T) {
	_, err := Parse([]byte("0000:00001g:5d2c1a:00000000000000000000ffffc0000201\x00"))
	if s, w := err.Error(), `pingaddr: QPN "00001g": byte 10 is 'g', not a lowercase hex digit`; s != w {
		t.Errorf("error %q, want %q", s, w)
	}
	e := &SyntaxError{Line: 3, Text: []byte(strings.Repeat("a", 100)), Msg: "100 bytes, want 52"}
	if s, w := e.Error(), `pingaddr: line 3: message "`+strings.Repeat("a", 80)+`"...: 100 bytes, want 52`; s != w {
		t.Errorf("error %q, want %q", s, w)
	}
}

// Parse and Marshal stay off the heap on success: an address exchange of
// 256 lines should not make 256 garbage objects.
func TestAllocs(t *testing.T) {
	msg := []byte(cMsg)
	d := Dest{QPN: 0x11, PSN: 0x5d2c1a, GID: rxeGID}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := Parse(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Marshal(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Parse and Marshal: %v allocations, want 0", n)
	}
}
