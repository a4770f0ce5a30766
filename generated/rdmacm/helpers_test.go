package rdmacm_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/cmem"
	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/verberr"
)

// bytesOf is the first n bytes at sa.
func bytesOf(sa *rdmacm.Sockaddr, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(sa)), n)
}

// family is what C reads as sa_family: host order.
func family(f uint16) []byte { return binary.NativeEndian.AppendUint16(nil, f) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// The bytes SockaddrOf writes, against the kernel ABI's layouts as package
// syscall declares them (RawSockaddrInet4, RawSockaddrInet6) and as bytes.
func TestSockaddrOfLayout(t *testing.T) {
	sa := rdmacm.SockaddrOf(netip.MustParseAddrPort("192.0.2.1:4791"))
	require.Equal(t, cat(family(syscall.AF_INET), []byte{0x12, 0xb7, 192, 0, 2, 1}, make([]byte, 8)), bytesOf(sa, 16))
	r4 := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa))
	require.EqualValues(t, syscall.AF_INET, r4.Family)
	require.Equal(t, [2]byte{0x12, 0xb7}, *(*[2]byte)(unsafe.Pointer(&r4.Port)), "the port in network order")
	require.Equal(t, [4]byte{192, 0, 2, 1}, r4.Addr)

	// An IPv4-mapped IPv6 address is unmapped to AF_INET, as package net does.
	require.Equal(t, bytesOf(sa, 16), bytesOf(rdmacm.SockaddrOf(netip.MustParseAddrPort("[::ffff:192.0.2.1]:4791")), 16))

	// A zone that names no interface is read as a decimal index.
	sa = rdmacm.SockaddrOf(netip.MustParseAddrPort("[2001:db8::1%4000000000]:80"))
	a16 := netip.MustParseAddr("2001:db8::1").As16()
	require.Equal(t, cat(family(syscall.AF_INET6), []byte{0, 80}, make([]byte, 4), a16[:],
		binary.NativeEndian.AppendUint32(nil, 4000000000)), bytesOf(sa, 28))
	r6 := (*syscall.RawSockaddrInet6)(unsafe.Pointer(sa))
	require.EqualValues(t, syscall.AF_INET6, r6.Family)
	require.Equal(t, [2]byte{0, 80}, *(*[2]byte)(unsafe.Pointer(&r6.Port)))
	require.Zero(t, r6.Flowinfo)
	require.Equal(t, a16, r6.Addr)
	require.EqualValues(t, 4000000000, r6.Scope_id)

	// A zone that names an interface is its index.
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	r6 = (*syscall.RawSockaddrInet6)(unsafe.Pointer(rdmacm.SockaddrOf(netip.MustParseAddrPort("[fe80::1%lo]:1"))))
	require.EqualValues(t, lo.Index, r6.Scope_id)
	r6 = (*syscall.RawSockaddrInet6)(unsafe.Pointer(rdmacm.SockaddrOf(netip.MustParseAddrPort("[fe80::1%no-such-if]:1"))))
	require.Zero(t, r6.Scope_id, "a zone that is neither a name nor a number")

	require.Nil(t, rdmacm.SockaddrOf(netip.AddrPort{}), "no address: nil, rdma_resolve_addr's no source")
}

func TestAddrPortOfRoundTrip(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:4791":             "192.0.2.1:4791",
		"0.0.0.0:0":                  "0.0.0.0:0",
		"255.255.255.255:65535":      "255.255.255.255:65535",
		"[::ffff:10.1.2.3]:7471":     "10.1.2.3:7471", // unmapped
		"[2001:db8::7]:18515":        "[2001:db8::7]:18515",
		"[::]:1":                     "[::]:1",
		"[fe80::1%lo]:9":             "[fe80::1%lo]:9",
		"[fe80::1%4000000000]:9":     "[fe80::1%4000000000]:9", // no such interface: the index
		"[fe80::1%no-such-if]:9":     "[fe80::1]:9",            // scope 0: no zone
		"[2001:db8::ffff:0:1]:65535": "[2001:db8::ffff:0:1]:65535",
	} {
		got, err := rdmacm.AddrPortOf(rdmacm.SockaddrOf(netip.MustParseAddrPort(in)))
		require.NoError(t, err, in)
		require.Equal(t, netip.MustParseAddrPort(want), got, in)
	}
}

func TestAddrPortOfBadFamily(t *testing.T) {
	var ss rdmacm.SockaddrStorage
	b := unsafe.Slice((*byte)(unsafe.Pointer(&ss)), unsafe.Sizeof(ss))
	binary.NativeEndian.PutUint16(b, syscall.AF_UNIX)
	_, err := rdmacm.AddrPortOf((*rdmacm.Sockaddr)(unsafe.Pointer(&ss)))
	require.EqualError(t, err, "rdmacm.AddrPortOf: address family 1 is neither AF_INET (2) nor AF_INET6 (10)")
	binary.NativeEndian.PutUint16(b, 27)
	_, err = rdmacm.AddrPortOf((*rdmacm.Sockaddr)(unsafe.Pointer(&ss)))
	require.EqualError(t, err, "rdmacm.AddrPortOf: address family 27 (AF_IB, an InfiniBand address) is neither AF_INET (2) nor AF_INET6 (10)")
	_, err = rdmacm.AddrPortOf(nil)
	require.EqualError(t, err, "rdmacm.AddrPortOf: the address is nil")
}

// The kernel as the oracle: a UDP socket connected with SockaddrOf's bytes
// (connect(2) reads the family, port, address and scope) reports the peer
// package syscall decodes; getsockname(2)'s bytes read back with AddrPortOf
// are the address package syscall decodes from them.
func TestSockaddrKernel(t *testing.T) {
	for _, c := range []struct {
		network, listen, dial string
		size                  int
	}{
		{"udp4", "127.0.0.1:0", "127.0.0.1", 16},
		{"udp4", "127.0.0.1:0", "::ffff:127.0.0.1", 16}, // unmapped: an AF_INET socket takes it
		{"udp6", "[::1]:0", "::1", 28},
	} {
		l, err := net.ListenPacket(c.network, c.listen)
		require.NoError(t, err)
		defer l.Close()
		port := uint16(l.LocalAddr().(*net.UDPAddr).Port)
		ap := netip.AddrPortFrom(netip.MustParseAddr(c.dial), port)

		domain := syscall.AF_INET
		if c.size == 28 {
			domain = syscall.AF_INET6
		}
		fd, err := syscall.Socket(domain, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		defer syscall.Close(fd)
		sa := rdmacm.SockaddrOf(ap)
		_, _, errno := syscall.Syscall(syscall.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(sa)), uintptr(c.size))
		require.Zero(t, errno, "connect(%s) with SockaddrOf's bytes: %v", ap, errno)

		peer, err := syscall.Getpeername(fd)
		require.NoError(t, err)
		local, err := syscall.Getsockname(fd)
		require.NoError(t, err)
		var ss rdmacm.SockaddrStorage
		n := uint32(unsafe.Sizeof(ss))
		_, _, errno = syscall.Syscall(syscall.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&ss)), uintptr(unsafe.Pointer(&n)))
		require.Zero(t, errno)
		require.EqualValues(t, c.size, n)
		got, err := rdmacm.AddrPortOf((*rdmacm.Sockaddr)(unsafe.Pointer(&ss)))
		require.NoError(t, err)

		switch p := peer.(type) {
		case *syscall.SockaddrInet4:
			require.Equal(t, ap.Addr().Unmap().As4(), p.Addr)
			require.EqualValues(t, port, p.Port)
			l := local.(*syscall.SockaddrInet4)
			require.Equal(t, netip.AddrPortFrom(netip.AddrFrom4(l.Addr), uint16(l.Port)), got)
		case *syscall.SockaddrInet6:
			require.Equal(t, ap.Addr().As16(), p.Addr)
			require.EqualValues(t, port, p.Port)
			l := local.(*syscall.SockaddrInet6)
			require.Equal(t, netip.AddrPortFrom(netip.AddrFrom16(l.Addr), uint16(l.Port)), got)
		}
		require.NotZero(t, got.Port(), "the kernel bound the socket to a port")
	}

	// The scope: connect(2) to a link-local address needs an interface,
	// EINVAL without; with sin6_scope_id the kernel binds the socket to that
	// interface (SO_BINDTOIFINDEX reads it back) before it finds no route.
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	for zone, index := range map[string]int{"": 0, "%lo": lo.Index, "%4000000": 4000000} {
		fd, err := syscall.Socket(syscall.AF_INET6, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		defer syscall.Close(fd)
		sa := rdmacm.SockaddrOf(netip.MustParseAddrPort("[fe80::1" + zone + "]:9"))
		_, _, errno := syscall.Syscall(syscall.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(sa)), 28)
		if index == 0 {
			require.Equal(t, syscall.EINVAL, errno, "connect to fe80::1 with no scope")
			continue
		}
		require.NotEqual(t, syscall.EINVAL, errno, "connect to fe80::1%s: the kernel saw no scope", zone)
		bound, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, soBindToIfindex)
		require.NoError(t, err)
		require.Equal(t, index, bound, "the interface connect(fe80::1%s) bound the socket to", zone)
	}
}

// soBindToIfindex is Linux's SO_BINDTOIFINDEX (since 5.0), which package
// syscall does not name.
const soBindToIfindex = 62

// fakeID is an rdma_cm_id in C memory, zeroed, with room for the private
// struct librdmacm wraps around it (the handle it copies into a command
// lies past the public struct), whose channel's fd is the write end of a
// pipe: a command librdmacm writes for the kernel lands in the pipe, where
// the test reads it. Only the calls that write one command and read
// nothing back can run on it.
func fakeID(t *testing.T) (*rdmacm.CMID, *os.File) {
	t.Helper()
	mem := cmem.NewSlice[uint64](512)
	t.Cleanup(func() { cmem.FreeSlice(mem) })
	ch := cmem.New[rdmacm.EventChannel]()
	t.Cleanup(func() { cmem.Free(ch) })
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); w.Close() })
	ch.FD = int32(w.Fd())
	id := (*rdmacm.CMID)(unsafe.Pointer(&mem[0]))
	id.Channel = ch
	return id, r
}

// command reads the n-byte command librdmacm wrote.
func command(t *testing.T, r *os.File, n int) []byte {
	t.Helper()
	b := make([]byte, n+1)
	got, err := r.Read(b)
	require.NoError(t, err)
	require.Equal(t, n, got, "the command's size")
	return b[:n]
}

// librdmacm as the oracle: rdma_resolve_addr takes SockaddrOf's Go memory
// through cgo's check, sizes each address by its family, copies it into
// the command (struct ucma_abi_resolve_ip: the header, src_addr and
// dst_addr as sockaddr_in6 at 8 and 36, id, timeout_ms at 68) and the
// destination into the id's route, from which AddrPortOf reads it back. On
// an id with no sync mode it returns once the command is written. (Before
// AF_IB support is probed, which no call here does, librdmacm writes this
// command of the kernel ABI's RDMA_USER_CM_CMD_RESOLVE_IP.)
func TestSockaddrThroughLibrdmacm(t *testing.T) {
	for _, c := range []struct {
		src, dst string
		size     int
	}{
		{"10.0.0.1:0", "10.0.0.2:7471", 16},
		{"[fe80::1%4000000000]:0", "[2001:db8::2]:18515", 28},
	} {
		id, r := fakeID(t)
		src, dst := rdmacm.SockaddrOf(netip.MustParseAddrPort(c.src)), rdmacm.SockaddrOf(netip.MustParseAddrPort(c.dst))
		require.NoError(t, rdmacm.ResolveAddr(id, src, dst, 2000))
		cmd := command(t, r, 72)
		require.Equal(t, uint32(3), binary.NativeEndian.Uint32(cmd[0:]), "UCMA_CMD_RESOLVE_IP")
		pad := make([]byte, 28-c.size)
		require.Equal(t, cat(bytesOf(src, c.size), pad), cmd[8:36], "src_addr: %d bytes as the family says, then zeros", c.size)
		require.Equal(t, cat(bytesOf(dst, c.size), pad), cmd[36:64], "dst_addr")
		require.Equal(t, uint32(2000), binary.NativeEndian.Uint32(cmd[68:]))

		got, err := rdmacm.AddrPortOf(id.Route.Addr.DstAddr())
		require.NoError(t, err)
		require.Equal(t, netip.MustParseAddrPort(c.dst), got)
	}

	// SockaddrOf's nil for no address is rdma_resolve_addr's no source.
	id, r := fakeID(t)
	require.NoError(t, rdmacm.ResolveAddr(id, rdmacm.SockaddrOf(netip.AddrPort{}), rdmacm.SockaddrOf(netip.MustParseAddrPort("10.0.0.2:1")), 1))
	require.Equal(t, make([]byte, 28), command(t, r, 72)[8:36], "src_addr")
}

// SetOptionValue passes the level, the option and sizeof(T) as optlen
// (struct ucma_abi_set_option: the header, optval at 8, id, level at 20,
// optname at 24, optlen at 28); the kernel checks optlen against the
// option's C type.
func TestSetOptionValue(t *testing.T) {
	id, r := fakeID(t)
	check := func(level, optname, optlen uint32) {
		t.Helper()
		cmd := command(t, r, 32)
		require.Equal(t, uint32(14), binary.NativeEndian.Uint32(cmd[0:]), "UCMA_CMD_SET_OPTION")
		require.NotZero(t, binary.NativeEndian.Uint64(cmd[8:]), "optval")
		require.Equal(t, level, binary.NativeEndian.Uint32(cmd[20:]), "level")
		require.Equal(t, optname, binary.NativeEndian.Uint32(cmd[24:]), "optname")
		require.Equal(t, optlen, binary.NativeEndian.Uint32(cmd[28:]), "optlen")
	}
	require.NoError(t, rdmacm.SetOptionValue(id, rdmacm.OptionID, rdmacm.OptionIDTos, uint8(32)))
	check(rdmacm.OptionID, rdmacm.OptionIDTos, 1)
	require.NoError(t, rdmacm.SetOptionValue(id, rdmacm.OptionID, rdmacm.OptionIDReuseaddr, int32(1)))
	check(rdmacm.OptionID, rdmacm.OptionIDReuseaddr, 4)
	require.NoError(t, rdmacm.SetOptionValue(id, rdmacm.OptionID, rdmacm.OptionIDACKTimeout, uint8(14)))
	check(rdmacm.OptionID, rdmacm.OptionIDACKTimeout, 1)
	require.NoError(t, rdmacm.SetOptionValue(id, rdmacm.OptionIB, rdmacm.OptionIBPath, [2]rdmacm.PathData{}))
	check(rdmacm.OptionIB, rdmacm.OptionIBPath, 2*72)

	id.Channel.FD = -1
	err := rdmacm.SetOptionValue(id, rdmacm.OptionID, rdmacm.OptionIDTos, uint8(0))
	var ve *verberr.Error
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "rdma_set_option", ve.Func())
	require.ErrorIs(t, err, syscall.EBADF)
}
