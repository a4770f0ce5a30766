package pingaddr

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func srqDests(n int) []Dest {
	ds := make([]Dest, n)
	for i := range ds {
		ds[i] = Dest{QPN: uint32(0x20 + i), PSN: uint32(0x100000 + i), GID: rxeGID}
	}
	return ds
}

// What WriteSRQ and WriteDone send is what the C client sends, and a
// Reader gets it back however the reads are cut.
func TestSRQStream(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	ds := srqDests(4)
	if err := w.WriteSRQ(ds); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteDone(); err != nil {
		t.Fatal(err)
	}
	if w.Line() != SRQLines+1 || buf.Len() != SRQLines*Size+len(Done) {
		t.Fatalf("wrote %d lines, %d bytes; want %d, %d", w.Line(), buf.Len(), SRQLines+1, SRQLines*Size+len(Done))
	}
	zero := "0000:000000:000000:" + strings.Repeat("0", 32) + "\x00"
	if got := buf.String()[4*Size:]; got != strings.Repeat(zero, SRQLines-4)+Done {
		t.Errorf("after the QPs: %q..., want zero lines and done", got[:2*Size])
	}
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"halves":   iotest.HalfReader,
	} {
		r := NewReader(wrap(bytes.NewReader(buf.Bytes())))
		got, err := r.ReadSRQ()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(ds) {
			t.Fatalf("%s: ReadSRQ = %d QPs, want %d", name, len(got), len(ds))
		}
		for i := range ds {
			if got[i] != ds[i] {
				t.Errorf("%s: QP %d: %+v, want %+v", name, i, got[i], ds[i])
			}
		}
		if err := r.ReadDone(); err != nil {
			t.Errorf("%s: ReadDone: %v", name, err)
		}
		if r.Line() != SRQLines+1 {
			t.Errorf("%s: Line = %d, want %d", name, r.Line(), SRQLines+1)
		}
	}
}

func TestReadDests(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.WriteDests(srqDests(3)); err != nil {
		t.Fatal(err)
	}
	r := NewReader(iotest.DataErrReader(&buf))
	got, err := r.ReadDests(3)
	if err != nil || len(got) != 3 || got[2] != srqDests(3)[2] {
		t.Errorf("ReadDests = %+v, %v", got, err)
	}
}

// Errors name the line: a bad field, a short read, a closed connection.
func TestReaderErrors(t *testing.T) {
	var good bytes.Buffer
	NewWriter(&good).WriteDests(srqDests(2))
	bad := strings.Replace(good.String(), "000021:", "00002g:", 1)

	_, err := NewReader(strings.NewReader(bad)).ReadDests(2)
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 2 || se.Field != "QPN" {
		t.Errorf("bad QPN on line 2: %v", err)
	}
	if want := `pingaddr: line 2: QPN "00002g": byte 10 is 'g', not a lowercase hex digit`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}

	_, err = NewReader(strings.NewReader(good.String()[:Size+20])).ReadDests(2)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "line 2: read 20 of the 52 bytes") {
		t.Errorf("20 bytes of line 2: %v", err)
	}
	_, err = NewReader(strings.NewReader(good.String()[:Size])).ReadDests(2)
	if !errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "line 2: the peer closed the connection") {
		t.Errorf("closed before line 2: %v", err)
	}
	boom := errors.New("boom")
	_, err = NewReader(iotest.TimeoutReader(iotest.OneByteReader(strings.NewReader(good.String())))).ReadDest()
	if !errors.Is(err, iotest.ErrTimeout) || !strings.Contains(err.Error(), "line 1: read 1 of the 52 bytes") {
		t.Errorf("reader failing after a byte: %v", err)
	}
	if err := NewWriter(errWriter{boom}).WriteDone(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "line 1: write done") {
		t.Errorf("WriteDone on a failing writer: %v", err)
	}
	if err := NewWriter(io.Discard).WriteDests([]Dest{{}, {QPN: 1 << 24}}); err == nil || !strings.Contains(err.Error(), "pingaddr: line 2: QPN 0x1000000 does not fit in 24 bits") {
		t.Errorf("WriteDests with a 25-bit QPN: %v", err)
	}

	if err := NewReader(strings.NewReader("done\n")).ReadDone(); !errors.As(err, &se) || se.Line != 1 {
		t.Errorf(`ReadDone of "done\n": %v`, err)
	}
	if err := NewReader(strings.NewReader(End)).ReadEnd(); err != nil {
		t.Errorf("ReadEnd: %v", err)
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

// ReadSRQ takes the zero lines for padding only after the QPs.
func TestReadSRQPadding(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	ds := srqDests(2)
	w.WriteDest(ds[0])
	w.WriteDest(Dest{})
	w.WriteDest(ds[1])
	for range SRQLines - 3 {
		w.WriteDest(Dest{})
	}
	_, err := NewReader(&buf).ReadSRQ()
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 3 || !strings.Contains(se.Msg, "after the zero message on line 2") {
		t.Errorf("a QP after a zero line: %v", err)
	}

	buf.Reset()
	NewWriter(&buf).WriteSRQ(nil)
	if got, err := NewReader(&buf).ReadSRQ(); err != nil || len(got) != 0 {
		t.Errorf("no QPs: %+v, %v", got, err)
	}
	if err := NewWriter(io.Discard).WriteSRQ([]Dest{ds[0], {}}); err == nil || !strings.Contains(err.Error(), "QP 1: an all-zero address") {
		t.Errorf("WriteSRQ with a zero address: %v", err)
	}
	if err := NewWriter(io.Discard).WriteSRQ(make([]Dest, SRQLines+1)); err == nil {
		t.Error("WriteSRQ took 257 QPs")
	}
}

func TestXSRQStream(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	d := XSRQDest{RecvQPN: 0x11, SendQPN: 0x12, PSN: 0x345678, SRQN: 1, GID: rxeGID}
	if err := w.WriteXSRQ(d); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteEnd(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != XSRQSize+len(End) {
		t.Fatalf("%d bytes, want %d", buf.Len(), XSRQSize+len(End))
	}
	r := NewReader(iotest.OneByteReader(&buf))
	if got, err := r.ReadXSRQ(); err != nil || got != d {
		t.Errorf("ReadXSRQ = %+v, %v; want %+v", got, err, d)
	}
	if err := r.ReadEnd(); err != nil {
		t.Error(err)
	}
	if err := NewWriter(io.Discard).WriteXSRQ(XSRQDest{RecvQPN: 1 << 24}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("WriteXSRQ of a 25-bit QPN: %v", err)
	}
}
