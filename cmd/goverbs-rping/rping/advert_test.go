package rping

import (
	"encoding/binary"
	"testing"
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
		readOK      bool
		writeOK     bool
	}{
		{"as rping sends it", advertBytes(0x7f0000001000, 0x1234, 64), 64, 40, true, true},
		{"longer than the local buffer", advertBytes(0x1000, 1, 65535), 64, 10, false, true},
		{"empty", advertBytes(0x1000, 1, 0), 64, 0, false, true},
		{"wraps the address space", advertBytes(^uint64(0)-10, 1, 64), 64, 40, false, false},
		{"too small to write back into", advertBytes(0x1000, 1, 16), 64, 40, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAdvert(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.ReadLen(tc.local); (err == nil) != tc.readOK {
				t.Errorf("ReadLen(%d) of %+v: %v", tc.local, a, err)
			}
			if _, err := a.WriteLen(tc.wlen); (err == nil) != tc.writeOK {
				t.Errorf("WriteLen(%d) of %+v: %v", tc.wlen, a, err)
			}
		})
	}
	if _, err := ParseAdvert(make([]byte, 15)); err == nil {
		t.Error("a truncated advertisement was accepted")
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
		a, err := ParseAdvert(b)
		if err != nil {
			if len(b) == infoSize {
				t.Fatalf("16 bytes refused: %v", err)
			}
			return
		}
		if len(b) != infoSize {
			t.Fatalf("%d bytes accepted", len(b))
		}
		if n, err := a.ReadLen(local); err == nil {
			if n <= 0 || n > local || uint64(n) != uint64(a.Len) || a.Addr+uint64(n)-1 < a.Addr {
				t.Fatalf("ReadLen(%d) of %+v accepted %d", local, a, n)
			}
		}
		if n, err := a.WriteLen(wlen); err == nil {
			if n != wlen || n < 0 || uint64(n) > uint64(a.Len) || n > 0 && a.Addr+uint64(n)-1 < a.Addr {
				t.Fatalf("WriteLen(%d) of %+v accepted %d", wlen, a, n)
			}
		}
	})
}
