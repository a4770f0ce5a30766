package pingaddr

import (
	"bytes"
	"fmt"
	"io"
)

// Reader reads messages from one direction of the TCP side channel. It
// counts them, so an error names the line (the message's place on the
// channel, from 1) as well as the field. It reads each message whole with
// io.ReadFull, however TCP splits it, and never reads past it.
type Reader struct {
	r    io.Reader
	line int
	buf  [XSRQSize]byte
}

// NewReader reads from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Line is how many messages have been read, whole or not.
func (r *Reader) Line() int { return r.line }

// next reads the next message of n bytes into r.buf.
func (r *Reader) next(n int, what string) ([]byte, error) {
	r.line++
	b := r.buf[:n]
	got, err := io.ReadFull(r.r, b)
	switch {
	case err == io.EOF:
		return nil, fmt.Errorf("pingaddr: line %d: the peer closed the connection before %s (%d bytes): %w", r.line, what, n, err)
	case err != nil:
		return nil, fmt.Errorf("pingaddr: line %d: read %d of the %d bytes of %s: %w", r.line, got, n, what, err)
	}
	return b, nil
}

// ReadDest reads one Dest message.
func (r *Reader) ReadDest() (Dest, error) {
	b, err := r.next(Size, "an address")
	if err != nil {
		return Dest{}, err
	}
	return parseDest(b, r.line)
}

// ReadDests reads n Dest messages.
func (r *Reader) ReadDests(n int) ([]Dest, error) {
	ds := make([]Dest, n)
	for i := range ds {
		var err error
		if ds[i], err = r.ReadDest(); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// ReadSRQ reads what ibv_srq_pingpong sends: SRQLines messages, its QPs'
// addresses and then all-zero ones. It returns the QPs' (the messages
// before the first zero one), and fails if a non-zero message follows a
// zero one. The caller compares their number with its own -q: the C tool
// does not, and connects its QPs to zeros when the peer has fewer.
func (r *Reader) ReadSRQ() ([]Dest, error) {
	var ds []Dest
	firstZero := 0
	for range SRQLines {
		d, err := r.ReadDest()
		if err != nil {
			return nil, err
		}
		switch {
		case d == Dest{}:
			if firstZero == 0 {
				firstZero = r.line
			}
		case firstZero != 0:
			return nil, &SyntaxError{Line: r.line, Text: bytes.Clone(r.buf[:Size]),
				Msg: fmt.Sprintf("a QP's address after the zero message on line %d: ibv_srq_pingpong sends its QPs first", firstZero)}
		default:
			ds = append(ds, d)
		}
	}
	return ds, nil
}

// ReadXSRQ reads one XSRQDest message.
func (r *Reader) ReadXSRQ() (XSRQDest, error) {
	b, err := r.next(XSRQSize, "an address")
	if err != nil {
		return XSRQDest{}, err
	}
	return parseXSRQ(b, r.line)
}

// ReadDone reads the client's Done, as the rc, uc, ud and srq servers
// wait for it before the ping-pong starts.
func (r *Reader) ReadDone() error { return r.literal(Done) }

// ReadEnd reads ibv_xsrq_pingpong's End.
func (r *Reader) ReadEnd() error { return r.literal(End) }

func (r *Reader) literal(want string) error {
	b, err := r.next(len(want), fmt.Sprintf("%q", want))
	if err != nil {
		return err
	}
	if string(b) != want {
		return &SyntaxError{Line: r.line, Text: bytes.Clone(b), Msg: fmt.Sprintf("want %q", want)}
	}
	return nil
}

// Writer writes messages to one direction of the TCP side channel, each in
// one Write, counting them as Reader does.
type Writer struct {
	w    io.Writer
	line int
}

// NewWriter writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Line is how many messages have been written, or tried.
func (w *Writer) Line() int { return w.line }

func (w *Writer) write(b []byte, what string) error {
	w.line++
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("pingaddr: line %d: write %s: %w", w.line, what, err)
	}
	return nil
}

// WriteDest writes one Dest message.
func (w *Writer) WriteDest(d Dest) error {
	b, err := d.marshal()
	if err != nil {
		w.line++
		return fmt.Errorf("pingaddr: line %d: %w", w.line, err)
	}
	return w.write(b[:], "an address")
}

// WriteDests writes a Dest message for each of ds.
func (w *Writer) WriteDests(ds []Dest) error {
	for _, d := range ds {
		if err := w.WriteDest(d); err != nil {
			return err
		}
	}
	return nil
}

// WriteSRQ writes what ibv_srq_pingpong sends: ds (at most SRQLines, none
// all-zero), then all-zero messages up to SRQLines.
func (w *Writer) WriteSRQ(ds []Dest) error {
	if len(ds) > SRQLines {
		return fmt.Errorf("pingaddr: %d QPs: ibv_srq_pingpong reads %d addresses", len(ds), SRQLines)
	}
	for i, d := range ds {
		if d == (Dest{}) {
			return fmt.Errorf("pingaddr: QP %d: an all-zero address, which reads as the padding after the last QP", i)
		}
	}
	if err := w.WriteDests(ds); err != nil {
		return err
	}
	for range SRQLines - len(ds) {
		if err := w.WriteDest(Dest{}); err != nil {
			return err
		}
	}
	return nil
}

// WriteXSRQ writes one XSRQDest message.
func (w *Writer) WriteXSRQ(d XSRQDest) error {
	b, err := d.marshal()
	if err != nil {
		w.line++
		return fmt.Errorf("pingaddr: line %d: %w", w.line, err)
	}
	return w.write(b[:], "an address")
}

// WriteDone writes Done, as the rc, uc, ud and srq clients do after
// reading the server's addresses.
func (w *Writer) WriteDone() error { return w.write([]byte(Done), "done") }

// WriteEnd writes ibv_xsrq_pingpong's End.
func (w *Writer) WriteEnd() error { return w.write([]byte(End), "END") }
