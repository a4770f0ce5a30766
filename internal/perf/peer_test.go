package perf

import (
	"bytes"
	"testing"

	"github.com/goverbs/goverbs/hand"
)

// FuzzPeer feeds the peer's address bytes to the decoder: no panic, every
// length but peerSize refused, and what is accepted is an endpoint in range
// whose buffer of size bytes does not wrap, and marshals back unchanged.
func FuzzPeer(f *testing.F) {
	good := peer{Endpoint: hand.Endpoint{QPN: 0x11, PSN: 5, GID: hand.GID{15: 1}}, Addr: 0x7f0000000000, RKey: 0x1234}
	f.Add(good.marshal(), 65536)
	f.Add(bytes.Repeat([]byte{0xff}, peerSize), 2)
	f.Add([]byte{1, 2, 3}, 0)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		var p peer
		if err := p.unmarshal(b, size); err != nil {
			if p != (peer{}) {
				t.Fatalf("refused (%v) but changed the peer to %+v", err, p)
			}
			return
		}
		if len(b) != peerSize || p.QPN < 2 || p.QPN >= 1<<24 || p.PSN >= 1<<24 {
			t.Fatalf("accepted %d bytes as %+v", len(b), p)
		}
		if size > 0 && p.Addr+uint64(size)-1 < p.Addr {
			t.Fatalf("accepted a buffer at %#x of %d bytes that wraps", p.Addr, size)
		}
		if !bytes.Equal(p.marshal(), b) {
			t.Fatalf("accepted %x, marshals back to %x", b, p.marshal())
		}
	})
}
