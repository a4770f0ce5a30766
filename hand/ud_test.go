package hand_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// grhArea builds a 40-byte GRH area as a device writes it.
func grhArea(b [hand.GRHSize]byte) *verbs.GRH { return (*verbs.GRH)(unsafe.Pointer(&b)) }

func ipv6Header(src netip.Addr) (b [hand.GRHSize]byte) {
	b[0] = 0x60 // version 6, as a GRH's IPVer
	b[6], b[7] = 17, 64
	s := src.As16()
	copy(b[8:24], s[:])
	return b
}

// ipv4Area is RoCE v2 over IPv4: 20 undefined bytes, then the IPv4 header.
func ipv4Area(src, dst netip.Addr, pad byte) (b [hand.GRHSize]byte) {
	for i := range 20 {
		b[i] = pad
	}
	h := b[20:40]
	h[0], h[8], h[9] = 0x45, 64, 17 // version 4, IHL 5; TTL; UDP
	binary.BigEndian.PutUint16(h[2:], 0x434)
	s, d := src.As4(), dst.As4()
	copy(h[12:16], s[:])
	copy(h[16:20], d[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(h[10:], ^uint16(sum))
	return b
}

func TestGRHSource(t *testing.T) {
	v4, v4dst := netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("192.0.2.1")
	for _, tc := range []struct {
		name string
		area [hand.GRHSize]byte
		want netip.Addr
	}{
		{"InfiniBand GRH", ipv6Header(netip.MustParseAddr("fe80::2c9:300:1:2")), netip.MustParseAddr("fe80::2c9:300:1:2")},
		{"RoCE v1, IPv4-mapped GID", ipv6Header(netip.MustParseAddr("::ffff:192.0.2.9")), netip.MustParseAddr("192.0.2.9")},
		{"RoCE v2 over IPv6", ipv6Header(netip.MustParseAddr("2001:db8::5")), netip.MustParseAddr("2001:db8::5")},
		{"RoCE v2 over IPv4, zeros first (rxe)", ipv4Area(v4, v4dst, 0), v4},
		{"RoCE v2 over IPv4, junk first", ipv4Area(v4, v4dst, 0x66), v4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hand.GRHSource(grhArea(tc.area))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	// The area of an IPv4 packet, read as a GRH, names a nonsense SGID:
	// what SplitUD's *verbs.GRH alone gave.
	area := ipv4Area(v4, v4dst, 0)
	sgid := netip.AddrFrom16(*grhArea(area).SGID.Raw())
	require.Equal(t, "::4500:434", sgid.String())

	// Undefined bytes that read as IPv6 and an IPv4 header whose checksum
	// fails: a GRH, as libibverbs decides.
	odd := ipv4Area(v4, v4dst, 0x60)
	odd[30] ^= 0xff
	got, err := hand.GRHSource(grhArea(odd))
	require.NoError(t, err)
	require.True(t, got.Is6(), "%s", got)
	var junk [hand.GRHSize]byte
	junk[0], junk[20] = 0x10, 0x10 // neither version 6 at 0 nor 4 at 20
	_, err = hand.GRHSource(grhArea(junk))
	require.ErrorIs(t, err, hand.ErrGRHUnknown)
	_, err = hand.GRHSource(nil)
	require.ErrorIs(t, err, hand.ErrGRHUnknown)
}
