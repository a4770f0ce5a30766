package wire

import (
	"bytes"
	"errors"
	"testing"
)

func validConnData() ConnData {
	return ConnData{Version: 1, Flags: FlagIOMap, Credits: 384,
		TargetSGL: SGE{Addr: 0x1000, Key: 7, Length: 2},
		DataBuf:   SGE{Addr: 0x100000, Key: 9, Length: 65536}}
}

// The wire form is rsocket's struct rs_conn_data, big-endian, 40 bytes,
// and round-trips.
func TestConnDataRoundTrip(t *testing.T) {
	d := validConnData()
	b := d.Append(nil)
	want := []byte{1, 2, 1, 0x80, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 7, 0, 0, 0, 2,
		0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 9, 0, 1, 0, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("Append: % x\nwant      % x", b, want)
	}
	got, err := ParseConnData(append(b, make([]byte, 16)...)) // rdma_cm's padding
	if err != nil || got != d {
		t.Fatalf("ParseConnData: %+v, %v; want %+v", got, err, d)
	}
}

// Each bad field is refused with an error naming it.
func TestConnDataRefused(t *testing.T) {
	for _, c := range []struct {
		field string
		mod   func(*ConnData)
	}{
		{"version", func(d *ConnData) { d.Version = 2 }},
		{"credits", func(d *ConnData) { d.Credits = 0 }},
		{"target_sgl.length", func(d *ConnData) { d.TargetSGL.Length = 0 }},
		{"target_sgl.length", func(d *ConnData) { d.TargetSGL.Length = MaxTargetSGL + 1 }},
		{"target_sgl.addr", func(d *ConnData) { d.TargetSGL.Addr = ^uint64(0) - 16 }},
		{"data_buf.length", func(d *ConnData) { d.DataBuf.Length = 0 }},
		{"data_buf.addr", func(d *ConnData) { d.DataBuf.Addr = ^uint64(0) - 65536 }},
	} {
		d := validConnData()
		c.mod(&d)
		_, err := ParseConnData(d.Append(nil))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want a FieldError naming it", c.field, err)
		}
	}
	if _, err := ParseConnData(make([]byte, 39)); err == nil {
		t.Error("39 bytes parsed")
	}
}

func TestImm(t *testing.T) {
	for _, c := range []struct {
		imm        uint32
		room       uint32
		sent, max  uint16
		ok         bool
		field, why string
	}{
		{Imm(OpData, 100), 100, 0, 384, true, "", "data within room"},
		{Imm(OpData, 101), 100, 0, 384, false, "length", "data past room"},
		{Imm(OpSGL, 384), 0, 0, 384, true, "", "credits at the queue"},
		{Imm(OpSGL, 385), 0, 0, 384, false, "credits", "credits past the queue"},
		{Imm(OpSGL, 65535+384), 0, 65535, 384, true, "", "credits past 16 bits, as rsocket sends them"},
		{Imm(OpSGL, 1<<17), 0, 0, 384, false, "credits", "credits past 17 bits"},
		{Imm(OpSGL, 10), 0, 20, 384, false, "credits", "credits behind what was sent"},
		{Imm(OpCtrl, CtrlShutdown), 0, 0, 384, true, "", "shutdown"},
		{Imm(OpCtrl, 3), 0, 0, 384, false, "control", "unknown control"},
		{Imm(OpIOMapSGL, 0), 0, 0, 384, false, "op", "iomap not offered"},
		{Imm(OpWrite, 0), 0, 0, 384, false, "op", "write op"},
		{Imm(1, 0), 0, 0, 384, false, "op", "reserved op"},
	} {
		_, err := ParseImm(c.imm, c.room, c.sent, c.max)
		var fe *FieldError
		if c.ok && err != nil || !c.ok && (!errors.As(err, &fe) || fe.Field != c.field) {
			t.Errorf("%s: %v", c.why, err)
		}
	}
}

func TestSGE(t *testing.T) {
	r := Region{Addr: 0x10000, Len: 0x20000, Key: 5}
	for _, c := range []struct {
		s     SGE
		field string
	}{
		{SGE{Addr: 0x10000, Key: 5, Length: 0x10000}, ""},
		{SGE{Addr: 0x20000, Key: 5, Length: 0x10000}, ""},
		{SGE{Addr: 0x20000, Key: 6, Length: 0x10000}, "key"},
		{SGE{Addr: 0x20000, Key: 5, Length: 0}, "length"},
		{SGE{Addr: 0x20001, Key: 5, Length: 0x10000}, "addr"},
		{SGE{Addr: 0xffff, Key: 5, Length: 1}, "addr"},
		{SGE{Addr: ^uint64(0), Key: 5, Length: 2}, "addr"},
	} {
		for _, big := range []bool{false, true} {
			s, err := ParseSGE(AppendSGE(nil, c.s, big), big, r)
			var fe *FieldError
			if c.field == "" && (err != nil || s != c.s) || c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field) {
				t.Errorf("%+v (big-endian %v): %+v, %v; want field %q", c.s, big, s, err, c.field)
			}
		}
	}
}

func TestScale(t *testing.T) {
	for v, want := range map[uint8]int{0: 0, 1: 1, 128: 128, 129: 256, 130: 512} {
		if got := ScaleToValue(v); got != want {
			t.Errorf("ScaleToValue(%d) = %d, want %d", v, got, want)
		}
	}
}

// Whatever the bytes, the decoders return an error or values that pass
// their checks, and never panic.
func FuzzConnData(f *testing.F) {
	d := validConnData()
	f.Add(d.Append(nil))
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseConnData(b)
		if err != nil {
			return
		}
		if d.Version != 1 || d.Credits == 0 || d.TargetSGL.Length == 0 || d.TargetSGL.Length > MaxTargetSGL || d.DataBuf.Length == 0 {
			t.Fatalf("accepted %+v", d)
		}
		r := d.RecvBuffer()
		if r.Addr+r.Len < r.Addr {
			t.Fatalf("accepted a receive buffer that wraps: %+v", d)
		}
		if got := d.Append(nil); !bytes.Equal(got[:8], append(b[:4:4], 0, 0, 0, b[7])) || !bytes.Equal(got[8:], b[8:40]) {
			t.Fatalf("re-encoded % x from % x", got, b[:40])
		}
	})
}

func FuzzImm(f *testing.F) {
	f.Add(Imm(OpData, 10), uint32(100), uint16(0), uint16(384))
	f.Add(Imm(OpSGL, 400), uint32(0), uint16(20), uint16(384))
	f.Fuzz(func(t *testing.T, imm, room uint32, sent, max uint16) {
		m, err := ParseImm(imm, room, sent, max)
		if err != nil {
			return
		}
		switch m.Op {
		case OpData:
			if m.Data > room {
				t.Fatalf("data %d past room %d", m.Data, room)
			}
		case OpSGL:
			if uint16(m.Data)-sent > max {
				t.Fatalf("credits %d past %d+%d", m.Data, sent, max)
			}
		case OpCtrl:
			if m.Data > CtrlShutdown {
				t.Fatalf("control %d", m.Data)
			}
		default:
			t.Fatalf("accepted op %v", m.Op)
		}
	})
}

func FuzzSGE(f *testing.F) {
	f.Add(AppendSGE(nil, SGE{Addr: 0x10000, Key: 5, Length: 0x10000}, false), false, uint64(0x10000), uint64(0x20000), uint32(5))
	f.Fuzz(func(t *testing.T, b []byte, big bool, addr, n uint64, key uint32) {
		r := Region{Addr: addr, Len: n, Key: key}
		s, err := ParseSGE(b, big, r)
		if err != nil {
			return
		}
		if s.Key != key || s.Length == 0 || s.Addr < addr || s.Addr+uint64(s.Length) < s.Addr || s.Addr+uint64(s.Length)-addr > n {
			t.Fatalf("accepted %+v outside %+v", s, r)
		}
	})
}
