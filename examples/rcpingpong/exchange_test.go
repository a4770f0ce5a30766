package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// roceGID is the RoCE v2 GID of 192.0.2.1, the soft-RoCE VM's address.
var roceGID = netip.MustParseAddr("::ffff:192.0.2.1").As16()

// The message as rdma-core's sprintf("%04x:%06x:%06x:%s") and
// gid_to_wire_gid make it, NUL included, and the line it prints.
func TestMarshalIsCFormat(t *testing.T) {
	d := dest{lid: 0x1a, qpn: 0x000011, psn: 0xdd9344, gid: roceGID}
	want := "001a:000011:dd9344:00000000000000000000ffffc0000201\x00"
	if got := string(d.marshal()); got != want {
		t.Errorf("marshal = %q, want %q", got, want)
	}
	if got, want := d.String(), "LID 0x001a, QPN 0x000011, PSN 0xdd9344, GID ::ffff:192.0.2.1"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	for _, d := range []dest{{}, {lid: 0xffff, qpn: 0xffffff, psn: 0xffffff, gid: [16]byte{15: 0xff}}} {
		if n := len(d.marshal()); n != msgLen {
			t.Errorf("%v marshals to %d bytes, want the C tool's %d", d, n, msgLen)
		}
	}
	if msgLen != 52 {
		t.Errorf("msgLen = %d, want 52 (sizeof the C tool's template)", msgLen)
	}
}

// The bytes ibv_rc_pingpong 33.2, 44.0 and 65.0 sent (captured in the
// soft-RoCE VM, internal/pingaddr/testdata) parse to the addresses the tools
// printed, and marshal back byte for byte.
func TestCapturedMessages(t *testing.T) {
	dirs, _ := filepath.Glob("../../internal/pingaddr/testdata/rdma-core-*")
	if len(dirs) < 3 {
		t.Fatalf("found %d capture directories (%q), want 33.2, 44.0 and 65.0", len(dirs), dirs)
	}
	for _, dir := range dirs {
		for _, side := range []string{"client", "server"} {
			t.Run(filepath.Base(dir)+"/"+side, func(t *testing.T) {
				sent := readFile(t, filepath.Join(dir, "rc."+side))
				printed := string(readFile(t, filepath.Join(dir, "rc."+side+".printed")))
				wantLen := msgLen
				if side == "client" {
					wantLen += len(doneMsg)
				}
				if len(sent) != wantLen {
					t.Fatalf("%s sent %d bytes, want %d", side, len(sent), wantLen)
				}
				d, err := parseDest(sent[:msgLen])
				if err != nil {
					t.Fatal(err)
				}
				if want := "  local address:  " + d.String() + "\n"; !strings.Contains(printed, want) {
					t.Errorf("parsed %q, but the tool printed:\n%s", want, printed)
				}
				if got := d.marshal(); !bytes.Equal(got, sent[:msgLen]) {
					t.Errorf("marshal = %q, the tool sent %q", got, sent[:msgLen])
				}
				if side == "client" && !bytes.Equal(sent[msgLen:], doneMsg) {
					t.Errorf("the client ended with %q, want %q", sent[msgLen:], doneMsg)
				}
			})
		}
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Each malformed message is refused with an error that names the field.
func TestParseDestErrors(t *testing.T) {
	const good = "0000:000011:dd9344:00000000000000000000ffffc0000201"
	for _, c := range []struct{ msg, want string }{
		{good, "no terminating NUL"},
		{"0000:000011:dd9344\x00", "3 fields, want 4 (LID:QPN:PSN:GID)"},
		{good + ":00\x00", "5 fields"},
		{"00g0:000011:dd9344:00000000000000000000ffffc0000201\x00", `LID "00g0" is not a 16-bit hexadecimal number`},
		{"10000:000011:dd9344:00000000000000000000ffffc0000201\x00", `LID "10000"`},
		{"0000:1000000:dd9344:00000000000000000000ffffc0000201\x00", `QPN "1000000" is not a 24-bit hexadecimal number`},
		{"0000::dd9344:00000000000000000000ffffc0000201\x00", `QPN ""`},
		{"0000:000011:-1:00000000000000000000ffffc0000201\x00", `PSN "-1" is not a 24-bit hexadecimal number`},
		{"0000:000011:dd9344:00000000000000000000ffffc00002\x00", `GID "00000000000000000000ffffc00002" has 30 characters, want 32 hexadecimal digits`},
		{"0000:000011:dd9344:00000000000000000000ffffc000020x\x00", `GID "00000000000000000000ffffc000020x" is not hexadecimal`},
	} {
		_, err := parseDest([]byte(c.msg))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseDest(%q) = %v, want an error containing %q", c.msg, err, c.want)
		}
	}
	// What follows the NUL is not the message's: C's sscanf stops there too.
	d, err := parseDest([]byte(good + "\x00garbage"))
	if err != nil || d.qpn != 0x11 || d.psn != 0xdd9344 || d.gid != roceGID {
		t.Errorf("parseDest with bytes after the NUL = %v, %v", d, err)
	}
}

// The two halves of the exchange against each other over loopback TCP: each
// learns the other's address, and the server connects before it answers.
func TestExchange(t *testing.T) {
	ln := listen(t)
	server := dest{lid: 1, qpn: 0x12, psn: 0x345678, gid: roceGID}
	client := dest{lid: 2, qpn: 0x13, psn: 0xabcdef}
	type result struct {
		d         dest
		err       error
		connected dest
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.d, r.err = acceptExchange(ln, server, func(d dest) error { r.connected = d; return nil })
		done <- r
	}()
	got, err := clientExchange("127.0.0.1", port(ln), client)
	if err != nil || got != server {
		t.Errorf("client learnt %v, %v; want %v", got, err, server)
	}
	r := <-done
	if r.err != nil || r.d != client || r.connected != client {
		t.Errorf("server learnt %v, %v and connected to %v; want %v", r.d, r.err, r.connected, client)
	}
}

// A client that sends a malformed address gets the server's refusal, not a
// connection: the error names the field.
func TestExchangeMalformedPeer(t *testing.T) {
	ln := listen(t)
	done := make(chan error, 1)
	go func() {
		_, err := acceptExchange(ln, dest{}, func(dest) error { return errors.New("connect called") })
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, msgLen)
	copy(msg, "0000:000011:zz9344:00000000000000000000ffffc0000201")
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	err = <-done
	c.Close()
	if err == nil || !strings.Contains(err.Error(), `PSN "zz9344"`) {
		t.Errorf("server: %v, want an error naming the PSN", err)
	}
}

// A server that answers with a short message fails the client clearly.
func TestExchangeShortAnswer(t *testing.T) {
	ln := listen(t)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.ReadFull(c, make([]byte, msgLen))
		c.Write([]byte("0000:0000"))
	}()
	_, err := clientExchange("127.0.0.1", port(ln), dest{})
	if err == nil || !strings.Contains(err.Error(), "reading the server's address") {
		t.Errorf("client: %v, want an error about reading the server's address", err)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }
