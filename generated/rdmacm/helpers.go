package rdmacm

// Hand-written helpers beside the generated stubs (the generator owns only
// the zrdmacm_* files): socket addresses, which the generated package keeps
// opaque since the C library declares them, and rdma_set_option's void *,
// given Go signatures so that a program using this package alone needs no
// unsafe.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"
)

// The byte offsets of struct sockaddr_in and struct sockaddr_in6
// (netinet/in.h) on Linux. sa_family and sin6_scope_id are in host order,
// the ports and addresses in network order; sin6_flowinfo (@4) is left 0.
const (
	offFamily  = 0  // sa_family_t sin_family, sin6_family
	offPort    = 2  // in_port_t sin_port, sin6_port
	offAddr4   = 4  // struct in_addr sin_addr
	offAddr6   = 8  // struct in6_addr sin6_addr
	offScopeID = 24 // uint32_t sin6_scope_id
	sizeofIn6  = 28 // sizeof(struct sockaddr_in6)
)

// afIB is Linux's AF_IB (struct sockaddr_ib), a family rdma_cm uses for
// native InfiniBand addresses and package syscall does not name.
const afIB = 27

// SockaddrOf returns ap as a struct sockaddr for the *Sockaddr parameters
// of BindAddr, ResolveAddr, JoinMulticast and LeaveMulticast: a
// sockaddr_in (AF_INET) for an IPv4 address and for an IPv4-mapped IPv6 one
// (::ffff:a.b.c.d, unmapped as package net does), a sockaddr_in6 (AF_INET6)
// for any other; nil for the zero AddrPort (an invalid address), which
// rdma_resolve_addr reads as no source address. An IPv6 zone becomes
// sin6_scope_id as package net makes it: the index of the interface it
// names, else the zone read as a decimal index, else 0.
//
// The address is a Go value holding no pointers, the size of a whole
// struct sockaddr_storage, so cgo lets it be passed to a stub: C copies it
// during the call. It must not be stored in a record that C keeps or that
// holds other pointers (CMJoinMcAttrEx.Addr, Addrinfo hints): such a field
// must point at C memory.
func SockaddrOf(ap netip.AddrPort) *Sockaddr {
	a := ap.Addr()
	if !a.IsValid() {
		return nil
	}
	ss := new(SockaddrStorage)
	b := (*[unsafe.Sizeof(SockaddrStorage{})]byte)(unsafe.Pointer(ss))
	binary.BigEndian.PutUint16(b[offPort:], ap.Port())
	if a.Is4() || a.Is4In6() {
		binary.NativeEndian.PutUint16(b[offFamily:], syscall.AF_INET)
		a4 := a.Unmap().As4()
		copy(b[offAddr4:], a4[:])
	} else {
		binary.NativeEndian.PutUint16(b[offFamily:], syscall.AF_INET6)
		a16 := a.As16()
		copy(b[offAddr6:], a16[:])
		binary.NativeEndian.PutUint32(b[offScopeID:], zoneIndex(a.Zone()))
	}
	return (*Sockaddr)(unsafe.Pointer(ss))
}

// AddrPortOf reads an AF_INET or AF_INET6 address, such as GetPeerAddr,
// GetLocalAddr and a CMID's Route.Addr.DstAddr() return, back into a
// netip.AddrPort. A nonzero sin6_scope_id becomes the zone as package net
// names it: the interface's name, else the index in decimal. The
// sin6_flowinfo is dropped. sa must point at as many bytes as its family's
// struct has (28 for AF_INET6), as C's addresses do. Another family (AF_IB,
// 27, on an rdma_cm_id bound to an InfiniBand address) and a nil sa are
// errors naming what was found.
func AddrPortOf(sa *Sockaddr) (netip.AddrPort, error) {
	if sa == nil {
		return netip.AddrPort{}, errNilSockaddr
	}
	b := (*[2]byte)(unsafe.Pointer(sa))
	switch family := binary.NativeEndian.Uint16(b[offFamily:]); family {
	case syscall.AF_INET:
		b := (*[unsafe.Sizeof(SockaddrIn{})]byte)(unsafe.Pointer(sa))
		a := netip.AddrFrom4([4]byte(b[offAddr4 : offAddr4+4]))
		return netip.AddrPortFrom(a, binary.BigEndian.Uint16(b[offPort:])), nil
	case syscall.AF_INET6:
		b := (*[sizeofIn6]byte)(unsafe.Pointer(sa))
		a := netip.AddrFrom16([16]byte(b[offAddr6 : offAddr6+16]))
		if scope := binary.NativeEndian.Uint32(b[offScopeID:]); scope != 0 {
			a = a.WithZone(zoneName(scope))
		}
		return netip.AddrPortFrom(a, binary.BigEndian.Uint16(b[offPort:])), nil
	case afIB:
		return netip.AddrPort{}, fmt.Errorf("rdmacm.AddrPortOf: address family %d (AF_IB, an InfiniBand address) is neither AF_INET (%d) nor AF_INET6 (%d)",
			family, syscall.AF_INET, syscall.AF_INET6)
	default:
		return netip.AddrPort{}, fmt.Errorf("rdmacm.AddrPortOf: address family %d is neither AF_INET (%d) nor AF_INET6 (%d)",
			family, syscall.AF_INET, syscall.AF_INET6)
	}
}

var errNilSockaddr = errors.New("rdmacm.AddrPortOf: the address is nil")

// zoneIndex is the sin6_scope_id of zone, as package net computes it.
func zoneIndex(zone string) uint32 {
	if zone == "" {
		return 0
	}
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return uint32(ifi.Index)
	}
	n, _ := strconv.ParseUint(zone, 10, 32)
	return uint32(n)
}

// zoneName is the zone of sin6_scope_id index, as package net names it.
func zoneName(index uint32) string {
	if ifi, err := net.InterfaceByIndex(int(index)); err == nil {
		return ifi.Name
	}
	return strconv.FormatUint(uint64(index), 10)
}

// SetOptionValue calls rdma_set_option(id, level, optname, &v, sizeof(v)).
// T is the option's C type (rdma_set_option(3), rdma/rdma_cma.h):
//
//	level OptionID:
//	  OptionIDTos         uint8  the IP type of service (RFC 2474)
//	  OptionIDReuseaddr   int32  nonzero: reuse the bound address (~SO_REUSEADDR)
//	  OptionIDAfonly      int32  nonzero: an AF_INET6 bind takes no IPv4 (~IPV6_V6ONLY)
//	  OptionIDACKTimeout  uint8  the QP's ACK timeout, 4.096 us * 2^v
//	level OptionIB:
//	  OptionIBPath        [N]PathData  path records (struct ibv_path_data[])
//
// for example SetOptionValue(id, OptionID, OptionIDTos, uint8(32)). level and
// optname take the constants as the header's enums type them (unsigned),
// where the C prototype, and so SetOption, takes int. The kernel checks optlen against the option's size: a Go type
// of another size fails with EINVAL. T must hold no pointers (cgo panics at
// the call when it holds Go pointers).
func SetOptionValue[T any](id *CMID, level, optname uint32, v T) error {
	return SetOption(id, int32(level), int32(optname), unsafe.Pointer(&v), uint64(unsafe.Sizeof(v)))
}
