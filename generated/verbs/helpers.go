package verbs

// Hand-written helpers beside the generated stubs (the generator owns only
// the zverbs_* files): the calls whose C signatures take void *, void ** or
// a C array, given Go signatures so that a program using this package alone
// needs no unsafe.

import (
	"fmt"
	"syscall"
	"unsafe"
)

// DeviceList is the list of devices ibv_get_device_list returns. Its
// backing array is C's, NULL-terminated one past its length: Free finds the
// list there, so keep the slice Devices returned (index it, range over it,
// but do not reslice it and then Free the reslice).
type DeviceList []*Device

// Devices calls ibv_get_device_list. Free the list once done with it; a
// device opened with OpenDevice stays valid after Free, while its context is
// open. The error is GetDeviceList's *verberr.Error: ENOSYS on a kernel
// without RDMA support, and ENOSYS naming the missing library (matching
// libload.ErrNoLibrary) when rdma-core is not installed, since the stub
// loads libibverbs.so.1 itself. A kernel with RDMA support but no device
// gives an empty list and no error.
func Devices() (DeviceList, error) {
	var n int32
	list, err := GetDeviceList(&n)
	if err != nil {
		return nil, err
	}
	// cap n+1 takes in the NULL that ends C's array, so that even an empty
	// list keeps the address Free hands back to ibv_free_device_list.
	return unsafe.Slice(list, int(n)+1)[:n], nil
}

// Free calls ibv_free_device_list. Call it once, on the list Devices
// returned; the list and the devices not opened are invalid after it. Free
// of a nil list (the zero DeviceList, or Devices' on error) is a no-op.
func (l DeviceList) Free() {
	if cap(l) == 0 {
		return
	}
	FreeDeviceList(&l[:1][0])
}

// errEmptyMR is RegMRSlice's error for an empty buffer.
var errEmptyMR = fmt.Errorf("verbs.RegMRSlice: the buffer is empty: ibv_reg_mr registers at least one byte: %w", syscall.EINVAL)

// RegMRSlice calls ibv_reg_mr on the bytes of buf. buf must be C memory
// (cmem.NewSlice) or mmap'd, never a Go slice: the device reads and writes
// it after the call returns, when Go may have freed a Go buffer or moved it
// (with a goroutine's stack); nothing detects the mistake. An empty buf is an error matching
// syscall.EINVAL, returned without calling C.
func RegMRSlice(pd *PD, buf []byte, access AccessFlags) (*MR, error) {
	if len(buf) == 0 {
		return nil, errEmptyMR
	}
	return RegMR(pd, unsafe.Pointer(&buf[0]), uint64(len(buf)), access)
}

// CQEvent calls ibv_get_cq_event on ch: it blocks (unless ch's fd is
// non-blocking, then EAGAIN) until a CQ bound to ch has an event, and
// returns that CQ. Every event must be acknowledged, with
// ACKCQEvents(cq, n), before the CQ is destroyed; acknowledge them in
// batches to save the mutex ibv_ack_cq_events takes. The CQ's cq_context,
// which C also returns, is left out: it is the pointer given to CreateCQ,
// which can only be nil or C memory (C holds it), and it stays readable as
// cq.CQContext.
func CQEvent(ch *CompChannel) (*CQ, error) {
	var cq *CQ
	var cqContext unsafe.Pointer
	if err := GetCQEvent(ch, &cq, &cqContext); err != nil {
		return nil, err
	}
	return cq, nil
}
