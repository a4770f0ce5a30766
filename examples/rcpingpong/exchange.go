package main

// The address exchange over TCP, as the C tool does it, byte for byte.

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// dest is one side's address as the exchange carries it.
type dest struct {
	lid uint16
	qpn uint32 // 24 bits, as every QP number
	psn uint32 // 24 bits
	gid [16]byte
}

// msgLen is the length of an address message: C's sizeof of its template,
// the text and its NUL. Both sides read exactly this much.
const msgLen = len("0000:000000:000000:00000000000000000000000000000000") + 1

// doneMsg is what the client sends once it has the server's address.
var doneMsg = []byte("done\x00")

// String is d as the C tool prints it after "local address:".
func (d dest) String() string {
	return fmt.Sprintf("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s", d.lid, d.qpn, d.psn, netip.AddrFrom16(d.gid))
}

// hasGID is the C tool's test: a GID whose interface ID (its last 8 bytes)
// is zero counts as none.
func (d dest) hasGID() bool {
	return [8]byte(d.gid[8:]) != [8]byte{}
}

// marshal is d as the C tool sends it: "%04x:%06x:%06x:" then the GID's
// 16 bytes in hex, in order, and a NUL; msgLen bytes.
func (d dest) marshal() []byte {
	return fmt.Appendf(nil, "%04x:%06x:%06x:%x\x00", d.lid, d.qpn, d.psn, d.gid[:])
}

// parseDest reads an address message. The text ends at the first NUL;
// every field must be there, in hex, within its width.
func parseDest(msg []byte) (dest, error) {
	text, _, ok := bytes.Cut(msg, []byte{0})
	if !ok {
		return dest{}, fmt.Errorf("address message %q has no terminating NUL", msg)
	}
	f := strings.Split(string(text), ":")
	if len(f) != 4 {
		return dest{}, fmt.Errorf("address message %q: %d fields, want 4 (LID:QPN:PSN:GID)", text, len(f))
	}
	var d dest
	lid, err := hexField(text, "LID", f[0], 16)
	if err != nil {
		return dest{}, err
	}
	qpn, err := hexField(text, "QPN", f[1], 24)
	if err != nil {
		return dest{}, err
	}
	psn, err := hexField(text, "PSN", f[2], 24)
	if err != nil {
		return dest{}, err
	}
	d.lid, d.qpn, d.psn = uint16(lid), uint32(qpn), uint32(psn)
	if len(f[3]) != 2*len(d.gid) {
		return dest{}, fmt.Errorf("address message %q: GID %q has %d characters, want %d hexadecimal digits", text, f[3], len(f[3]), 2*len(d.gid))
	}
	if _, err := hex.Decode(d.gid[:], []byte(f[3])); err != nil {
		return dest{}, fmt.Errorf("address message %q: GID %q is not hexadecimal", text, f[3])
	}
	return d, nil
}

// hexField parses field name of the address message text: s, in hex, of
// at most bits bits.
func hexField(text []byte, name, s string, bits int) (uint64, error) {
	v, err := strconv.ParseUint(s, 16, bits)
	if err != nil {
		return 0, fmt.Errorf("address message %q: %s %q is not a %d-bit hexadecimal number", text, name, s, bits)
	}
	return v, nil
}

// clientExchange sends local to the server at host:port and returns the
// server's address, then says "done".
func clientExchange(host string, port int, local dest) (dest, error) {
	conn, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return dest{}, err
	}
	defer conn.Close()
	if _, err := conn.Write(local.marshal()); err != nil {
		return dest{}, fmt.Errorf("sending the local address: %w", err)
	}
	msg := make([]byte, msgLen)
	if _, err := io.ReadFull(conn, msg); err != nil {
		return dest{}, fmt.Errorf("reading the server's address: %w", err)
	}
	remote, err := parseDest(msg)
	if err != nil {
		return dest{}, err
	}
	if _, err := conn.Write(doneMsg); err != nil {
		return dest{}, fmt.Errorf("sending done: %w", err)
	}
	return remote, nil
}

// serverExchange waits for one client on port, reads its address, calls
// connect with it, answers with local and waits for the client's "done".
func serverExchange(port int, local dest, connect func(dest) error) (dest, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return dest{}, err
	}
	return acceptExchange(ln, local, connect)
}

// acceptExchange is serverExchange on ln, which it closes after its one
// client, as the C tool does.
func acceptExchange(ln net.Listener, local dest, connect func(dest) error) (dest, error) {
	conn, err := ln.Accept()
	ln.Close()
	if err != nil {
		return dest{}, err
	}
	defer conn.Close()
	msg := make([]byte, msgLen)
	if _, err := io.ReadFull(conn, msg); err != nil {
		return dest{}, fmt.Errorf("reading the client's address: %w", err)
	}
	remote, err := parseDest(msg)
	if err != nil {
		return dest{}, err
	}
	if err := connect(remote); err != nil {
		return dest{}, err
	}
	if _, err := conn.Write(local.marshal()); err != nil {
		return dest{}, fmt.Errorf("sending the local address: %w", err)
	}
	done := make([]byte, len(doneMsg))
	if _, err := io.ReadFull(conn, done); err != nil {
		return dest{}, fmt.Errorf("waiting for the client's done: %w", err)
	}
	if !bytes.Equal(done, doneMsg) {
		return dest{}, fmt.Errorf("the client sent %q, want %q", done, doneMsg)
	}
	return remote, nil
}
