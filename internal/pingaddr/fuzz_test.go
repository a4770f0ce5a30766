package pingaddr

import (
	"bytes"
	"errors"
	"testing"
)

// Parse never panics; what it accepts marshals back to the same bytes, so
// it accepts exactly the C format; what it refuses is a *SyntaxError.
func FuzzParse(f *testing.F) {
	f.Add([]byte(cMsg))
	f.Add([]byte("0000:000000:000000:00000000000000000000000000000000\x00"))
	f.Add([]byte("ffff:ffffff:ffffff:fe8000000000000000000000000000ff\x00"))
	f.Add([]byte("0000:000011:5D2C1A:00000000000000000000ffffc0000201\x00"))
	f.Add([]byte("1:11:5d2c1a:00000000000000000000ffffc0000201\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("done\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		d, err := Parse(msg)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(msg) || d != (Dest{}) {
				t.Fatalf("Parse(%q) = %+v, %v", msg, d, err)
			}
			return
		}
		b, err := d.Marshal()
		if err != nil || !bytes.Equal(b[:], msg) {
			t.Fatalf("Parse(%q) = %+v, which marshals to %q, %v", msg, d, b, err)
		}
	})
}

// The same for ibv_xsrq_pingpong's message.
func FuzzParseXSRQ(f *testing.F) {
	f.Add([]byte("0012:000011:000012:abcdef:000003:00000000000000000000ffffc0000201\x00"))
	f.Add([]byte(cMsg))
	f.Fuzz(func(t *testing.T, msg []byte) {
		d, err := ParseXSRQ(msg)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || d != (XSRQDest{}) {
				t.Fatalf("ParseXSRQ(%q) = %+v, %v", msg, d, err)
			}
			return
		}
		b, err := d.Marshal()
		if err != nil || !bytes.Equal(b[:], msg) {
			t.Fatalf("ParseXSRQ(%q) = %+v, which marshals to %q, %v", msg, d, b, err)
		}
	})
}

// Parse(Marshal(d)) == d for every d that fits; Marshal refuses the rest.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint16(0), uint32(0x11), uint32(0x5d2c1a), rxeGID[:])
	f.Add(uint16(0xffff), uint32(1<<24), uint32(0), []byte{})
	f.Fuzz(func(t *testing.T, lid uint16, qpn, psn uint32, gid []byte) {
		d := Dest{LID: lid, QPN: qpn, PSN: psn}
		copy(d.GID[:], gid)
		b, err := d.Marshal()
		if qpn>>24 != 0 || psn>>24 != 0 {
			if err == nil {
				t.Fatalf("Marshal(%+v) = %q: want an error", d, b)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(b[:])
		if err != nil || got != d {
			t.Fatalf("Parse(Marshal(%+v)) = %+v, %v", d, got, err)
		}
	})
}

// A Reader over any 256 lines never panics, and the addresses ReadSRQ
// accepts written back with WriteSRQ are the bytes it read. The input is
// laid over 256 zero lines: a 13 KB input would leave the fuzzer
// minimizing instead of fuzzing.
func FuzzReadSRQ(f *testing.F) {
	var zeros bytes.Buffer
	NewWriter(&zeros).WriteSRQ(nil)
	var buf bytes.Buffer
	NewWriter(&buf).WriteDests([]Dest{{QPN: 0x11, PSN: 1, GID: rxeGID}, {QPN: 0x12, PSN: 2, GID: rxeGID}})
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:70])
	f.Fuzz(func(t *testing.T, head []byte) {
		if len(head) > zeros.Len() {
			return
		}
		in := append(bytes.Clone(head), zeros.Bytes()[len(head):]...)
		ds, err := NewReader(bytes.NewReader(in)).ReadSRQ()
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := NewWriter(&out).WriteSRQ(ds); err != nil || !bytes.Equal(out.Bytes(), in) {
			t.Fatalf("ReadSRQ = %d QPs, %v; written back they differ from the input", len(ds), err)
		}
	})
}
