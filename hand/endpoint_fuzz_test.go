package hand_test

import (
	"bytes"
	"testing"

	"github.com/goverbs/goverbs/hand"
)

// FuzzEndpoint feeds the peer's bytes to Endpoint.UnmarshalBinary: it never
// panics, refuses every length but EndpointSize, and what it accepts is in
// range (24-bit QPN above 1 and PSN, an address) and marshals back to the
// same bytes, so nothing the peer sent is silently changed before Connect.
func FuzzEndpoint(f *testing.F) {
	good, _ := hand.Endpoint{QPN: 0x11, PSN: 0xabcdef, GID: hand.GID{0: 0xfe, 1: 0x80, 15: 1}}.MarshalBinary()
	f.Add(good)
	ib, _ := hand.Endpoint{QPN: 0xffffff, PSN: 0, LID: 7}.MarshalBinary()
	f.Add(ib)
	f.Add([]byte{})
	f.Add(make([]byte, hand.EndpointSize))
	f.Add(bytes.Repeat([]byte{0xff}, hand.EndpointSize))
	f.Add(bytes.Repeat([]byte{1}, hand.EndpointSize+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e hand.Endpoint
		err := e.UnmarshalBinary(b)
		if len(b) != hand.EndpointSize {
			if err == nil {
				t.Fatalf("%d bytes accepted", len(b))
			}
			return
		}
		if err != nil {
			if e != (hand.Endpoint{}) {
				t.Fatalf("refused (%v) but changed the Endpoint to %+v", err, e)
			}
			return
		}
		if e.QPN < 2 || e.QPN >= 1<<24 || e.PSN >= 1<<24 || e.GID.IsZero() && e.LID == 0 {
			t.Fatalf("accepted an Endpoint out of range: %+v", e)
		}
		again, err := e.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, marshals back to %x (%v)", b, again, err)
		}
	})
}
