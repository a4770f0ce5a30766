package rping

import (
	"encoding/binary"
	"testing"

	"github.com/goverbs/goverbs/hand"
)

func advertBytes(addr uint64, rkey, n uint32) []byte {
	b := make([]byte, infoSize)
	binary.BigEndian.PutUint64(b, addr)
	binary.BigEndian.PutUint32(b[8:], rkey)
	binary.BigEndian.PutUint32(b[12:], n)
	return b
}

func TestAdvertChecks(t *testing.T) {
	for _, tc := range []struct {
		name        string
		b           []byte
		local, wlen int
		parseOK     bool
		readOK      bool
		writeOK     bool
	}{
		{"as rping sends it", advertBytes(0x7f0000001000, 0x1234, 64), 64, 40, true, true, true},
		{"longer than the local buffer", advertBytes(0x1000, 1, 65535), 64, 10, true, false, true},
		{"empty", advertBytes(0x1000, 1, 0), 64, 0, true, false, true},
		{"too small to write back into", advertBytes(0x1000, 1, 16), 64, 40, true, true, false},
		// Refused as it is decoded, before either check.
		{"wraps the address space", advertBytes(^uint64(0)-10, 1, 64), 64, 40, false, false, false},
		{"truncated", advertBytes(0x1000, 1, 64)[:15], 64, 40, false, false, false},
		{"long", append(advertBytes(0x1000, 1, 64), 0), 64, 40, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a hand.RemoteBuffer
			err := a.UnmarshalBinary(tc.b)
			if (err == nil) != tc.parseOK {
				t.Fatalf("UnmarshalBinary(%x): %v", tc.b, err)
			}
			if err != nil {
				return
			}
			if err := readFrom(a, tc.local); (err == nil) != tc.readOK {
				t.Errorf("readFrom(%v, %d): %v", a, tc.local, err)
			}
			if _, err := writeTo(a, tc.wlen); (err == nil) != tc.writeOK {
				t.Errorf("writeTo(%v, %d): %v", a, tc.wlen, err)
			}
		})
	}
}

// FuzzAdvert feeds a peer's advertisement to the decoder and to the checks
// the server makes before posting: nothing panics, and whatever passes
// describes an RDMA read that fits the local buffer and a write that fits
// the advertised one, neither wrapping the address space.
func FuzzAdvert(f *testing.F) {
	f.Add(advertBytes(0x7f0000001000, 0x1234, 64), 64, 40)
	f.Add(advertBytes(^uint64(0), 0, ^uint32(0)), 65535, 65535)
	f.Add([]byte{1, 2, 3}, 64, 0)
	f.Fuzz(func(t *testing.T, b []byte, local, wlen int) {
		var a hand.RemoteBuffer
		if err := a.UnmarshalBinary(b); err != nil {
			return // hand.FuzzRemoteBuffer holds the decoder to its contract
		}
		if len(b) != infoSize {
			t.Fatalf("%d bytes accepted", len(b))
		}
		wraps := func(addr uint64, n int) bool { return n > 0 && addr+uint64(n)-1 < addr }
		if err := readFrom(a, local); err == nil {
			if n := a.Len(); n <= 0 || n > local || wraps(a.Addr(), n) {
				t.Fatalf("readFrom(%v, %d) accepted it", a, local)
			}
		}
		if dst, err := writeTo(a, wlen); err == nil {
			if dst.Len() != wlen || wlen < 0 || wlen > a.Len() || dst.Addr() != a.Addr() ||
				dst.RKey() != a.RKey() || wraps(dst.Addr(), wlen) {
				t.Fatalf("writeTo(%v, %d) accepted %v", a, wlen, dst)
			}
		}
	})
}
