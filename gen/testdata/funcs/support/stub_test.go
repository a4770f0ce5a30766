// Hand-written test of the golden case's generated stubs, run by gen's
// TestGolden in a temporary module against externs.c. Not generated.

package verbs

import (
	"testing"
	"unsafe"
)

func TestStubs(t *testing.T) {
	qp := QP{QPNum: 41}
	if got := QPNum(&qp); got != 41 {
		t.Errorf("QPNum (static inline) = %d, want 41", got)
	}
	ACKEvents(&qp, 2)
	if qp.QPNum != 43 {
		t.Errorf("ACKEvents (extern, void) left qp_num %d, want 43", qp.QPNum)
	}

	var pd PD
	buf := make([]byte, 64)
	addr := unsafe.Pointer(&buf[0])
	if mr := RegMR(&pd, addr, 64, uint32(AccessLocalWrite)); unsafe.Pointer(mr) != addr {
		t.Errorf("RegMR (function-like macro) = %p, want %p", mr, addr)
	}
	if mr := XXRegMR(&pd, addr, 64, uint32(AccessOptionalRange), 0); unsafe.Pointer(mr) != addr {
		t.Errorf("XXRegMR = %p, want %p", mr, addr)
	}

	var attr PortAttr
	if rc := QueryPort(nil, 3, &attr); rc != 0 || attr.LID != 3 || attr.MaxMsgSz != 1<<31 {
		t.Errorf("QueryPort (function-like macro) = %d, %+v; want 0, lid 3, max_msg_sz 2^31", rc, attr)
	}

	sge := MakeSGE(0x1000, 256)
	if sge.Addr != 0x1000 || sge.Length != 256 || sge.Lkey != 7 {
		t.Errorf("MakeSGE (struct result) = %+v", sge)
	}
	if n := SGEBytes(sge, AccessLocalWrite); n != 256 {
		t.Errorf("SGEBytes (struct and enum arguments) = %d, want 256", n)
	}
	if p := NodeName(1); p == nil || *p != 'C' {
		t.Errorf("NodeName (const char * result) = %v", p)
	}
}
