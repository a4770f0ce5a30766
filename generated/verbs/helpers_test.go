package verbs_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/cmem"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/verberr"
)

// Devices on this machine: on a kernel without RDMA support (no
// /sys/class/infiniband, as on a host without RDMA) GetDeviceList's own
// ENOSYS; with it, a list whose devices are named and whose backing array
// is C's, NULL-terminated. The soft-RoCE VM's tests (tests/rxe) open a
// device from the list.
func TestDevices(t *testing.T) {
	l, err := verbs.Devices()
	if _, statErr := os.Stat("/sys/class/infiniband"); errors.Is(statErr, os.ErrNotExist) {
		require.Nil(t, l)
		var ve *verberr.Error
		require.ErrorAs(t, err, &ve)
		require.Equal(t, "ibv_get_device_list", ve.Func())
		require.ErrorIs(t, err, syscall.ENOSYS)
		l.Free() // the nil list: a no-op
		return
	}
	require.NoError(t, err)
	defer l.Free()
	require.Equal(t, len(l)+1, cap(l), "the list's cap takes in C's terminating NULL")
	require.Nil(t, l[:cap(l)][len(l)], "C's array ends with NULL")
	for _, d := range l {
		require.NotEmpty(t, cmem.ArrayString(d.Name[:]))
		require.Equal(t, cmem.ArrayString(d.Name[:]), cmem.GoString(verbs.GetDeviceName(d)))
	}
}

func TestDeviceListZeroFree(t *testing.T) {
	var l verbs.DeviceList
	l.Free() // nothing to free: no call into C, which would crash on NULL
}

// An empty buffer fails before C is called: the nil PD would crash it.
func TestRegMRSliceEmpty(t *testing.T) {
	for _, buf := range [][]byte{nil, cmem.NewSlice[byte](0), make([]byte, 0, 8)} {
		mr, err := verbs.RegMRSlice(nil, buf, verbs.AccessLocalWrite)
		require.Nil(t, mr)
		require.ErrorIs(t, err, syscall.EINVAL)
		require.EqualError(t, err, "verbs.RegMRSlice: the buffer is empty: ibv_reg_mr registers at least one byte: invalid argument")
	}
}

// CQEvent returns ibv_get_cq_event's error as GetCQEvent does. Its success
// needs a device's CQ (ibv_get_cq_event calls the provider's cq_event): the
// soft-RoCE VM's tests (tests/rxe) cover it. Here the channel is a record in
// C memory whose fd is a pipe, which libibverbs reads as it reads a
// completion channel.
func TestCQEventErrors(t *testing.T) {
	var p [2]int
	require.NoError(t, syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC))
	defer syscall.Close(p[0])
	defer syscall.Close(p[1])
	ch := cmem.New[verbs.CompChannel]()
	defer cmem.Free(ch)

	ch.FD = int32(p[0])
	cq, err := verbs.CQEvent(ch) // nothing to read on a non-blocking fd
	require.Nil(t, cq)
	var ve *verberr.Error
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "ibv_get_cq_event", ve.Func())
	require.ErrorIs(t, err, syscall.EAGAIN)

	ch.FD = -1
	cq, err = verbs.CQEvent(ch) // no fd
	require.Nil(t, cq)
	require.ErrorIs(t, err, syscall.EBADF)
	require.EqualError(t, err, "ibv_get_cq_event: bad file descriptor (EBADF)")
}
