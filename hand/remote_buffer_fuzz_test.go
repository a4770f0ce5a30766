package hand_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/goverbs/goverbs/hand"
)

// FuzzRemoteBuffer feeds a peer's bytes to RemoteBuffer.UnmarshalBinary,
// and an offset and length to Slice of what it accepted: neither panics;
// every length but RemoteBufferSize is refused; what is accepted does not
// wrap the address space and marshals back to the same bytes; a slice is
// accepted exactly when it lies within the buffer, and is that part of it.
func FuzzRemoteBuffer(f *testing.F) {
	f.Add(rpingInfo(0x7f0000001000, 0x1234, 64), 0, 64)
	f.Add(rpingInfo(0x7f0000001000, 0x1234, 64), 16, 48)
	f.Add(rpingInfo(0x7f0000001000, 0x1234, 64), 16, 49)
	f.Add(make([]byte, hand.RemoteBufferSize), 0, 0)                // rping's go-ahead
	f.Add(rpingInfo(math.MaxUint64, 1, 1), 1, 0)                    // the last byte
	f.Add(rpingInfo(math.MaxUint64-10, 1, 64), 0, 1)                // wraps
	f.Add(bytes.Repeat([]byte{0xff}, hand.RemoteBufferSize), -1, 1) // wraps, all ones
	f.Add(rpingInfo(0x1000, 1, math.MaxUint32), math.MaxInt, math.MaxInt)
	f.Add([]byte{1, 2, 3}, 0, 0)
	f.Add(bytes.Repeat([]byte{1}, hand.RemoteBufferSize+1), 0, 0)
	f.Fuzz(func(t *testing.T, b []byte, off, n int) {
		var r hand.RemoteBuffer
		err := r.UnmarshalBinary(b)
		if len(b) != hand.RemoteBufferSize {
			if err == nil {
				t.Fatalf("%d bytes accepted", len(b))
			}
			return
		}
		if err != nil {
			if r != (hand.RemoteBuffer{}) {
				t.Fatalf("refused (%v) but changed the RemoteBuffer to %v", err, r)
			}
			return
		}
		if r.Len() > 0 && r.Addr()+uint64(r.Len()-1) < r.Addr() {
			t.Fatalf("accepted a buffer that wraps the address space: %v", r)
		}
		again, err := r.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, marshals back to %x (%v)", b, again, err)
		}

		within := off >= 0 && n >= 0 && off <= r.Len() && n <= r.Len()-off
		s, err := r.Slice(off, n)
		if (err == nil) != within {
			t.Fatalf("Slice(%d, %d) of %v: %v, %v", off, n, r, s, err)
		}
		if err != nil {
			if s != (hand.RemoteBuffer{}) {
				t.Fatalf("Slice(%d, %d) of %v failed (%v) but returned %v", off, n, r, err, s)
			}
			return
		}
		if s.Addr() != r.Addr()+uint64(off) || s.Len() != n || s.RKey() != r.RKey() {
			t.Fatalf("Slice(%d, %d) of %v is %v", off, n, r, s)
		}
		// A slice goes over the wire and comes back the same.
		sb, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("Slice(%d, %d) of %v does not marshal: %v", off, n, r, err)
		}
		var back hand.RemoteBuffer
		if err := back.UnmarshalBinary(sb); err != nil || back != s {
			t.Fatalf("%v went over the wire as %x and came back as %v (%v)", s, sb, back, err)
		}
	})
}
