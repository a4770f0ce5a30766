package rxe

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand"
)

func TestControlMRAlloc(t *testing.T) {
	ctx, _ := ctlDevice(t)
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, pd)

	const size = 1 << 20
	mr, err := pd.Alloc(size, hand.AccessLocalWrite|hand.AccessRemoteWrite|hand.AccessRemoteRead)
	require.NoError(t, err)
	require.Equal(t, size, mr.Len())
	require.Len(t, mr.Bytes(), size)
	require.Zero(t, mr.Addr()%uint64(os.Getpagesize()), "page aligned")
	require.Equal(t, uint64(uintptr(unsafe.Pointer(&mr.Bytes()[0]))), mr.Addr())
	require.NotZero(t, mr.LKey())
	require.NotZero(t, mr.RKey())
	require.Same(t, pd, mr.PD())
	require.Equal(t, mr.LKey(), mr.Raw().LKey)
	copy(mr.Bytes()[size-5:], "hello")
	sge := mr.SGE(8, 100)
	require.Equal(t, mr.Addr()+8, sge.Addr)
	require.Equal(t, uint32(100), sge.Length)
	require.Equal(t, mr.LKey(), sge.LKey)

	require.NoError(t, mr.Close())
	require.NoError(t, mr.Close(), "second Close")
}

func TestControlMRRegisterCallerMemory(t *testing.T) {
	ctx, _ := ctlDevice(t)
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, pd)

	mem, err := syscall.Mmap(-1, 0, 3*4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer syscall.Munmap(mem)
	copy(mem, "caller memory")
	// A region need not start on a page boundary.
	mr, err := pd.Register(mem[100:9000], hand.AccessLocalWrite)
	require.NoError(t, err)
	require.Equal(t, uint64(uintptr(unsafe.Pointer(&mem[100]))), mr.Addr())
	require.Equal(t, 8900, mr.Len())
	require.True(t, bytes.Equal(mem[100:9000], mr.Bytes()))
	require.NoError(t, mr.Close())
	require.Equal(t, "caller memory", string(mem[:13]), "Close leaves caller memory mapped and intact")

	_, err = pd.Register(nil, hand.AccessLocalWrite)
	require.ErrorIs(t, err, syscall.EINVAL)
	_, err = pd.Register(mem, hand.AccessRemoteWrite)
	require.ErrorIs(t, err, syscall.EINVAL, "remote write without local write")
	require.ErrorContains(t, err, "AccessLocalWrite")
}

// Closing a PD with a live MR is an error that names the MR; nothing is
// closed, and after the MR goes the PD closes.
func TestControlPDWithLiveMR(t *testing.T) {
	ctx, _ := ctlDevice(t)
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	mr, err := pd.Alloc(8192, hand.AccessLocalWrite)
	require.NoError(t, err)

	err = pd.Close()
	var busy *hand.BusyError
	require.ErrorAs(t, err, &busy)
	require.ErrorIs(t, err, syscall.EBUSY)
	require.Equal(t, []string{fmt.Sprintf("MR lkey %#x (8192 bytes)", mr.LKey())}, busy.Children)
	t.Log(err)

	// The PD is still usable, and so is the MR.
	mr2, err := pd.Alloc(4096, hand.AccessLocalWrite)
	require.NoError(t, err)
	mr.Bytes()[0] = 1
	require.ErrorAs(t, pd.Close(), &busy)
	require.Len(t, busy.Children, 2)

	require.NoError(t, mr.Close())
	require.NoError(t, mr2.Close())
	require.NoError(t, pd.Close())
	_, err = pd.Alloc(4096, hand.AccessLocalWrite)
	require.ErrorIs(t, err, hand.ErrClosed)
}

// rxe has no on-demand paging (nor dma-buf import): the registration says
// so with ErrNotSupported.
func TestControlODPAndDmabuf(t *testing.T) {
	ctx, _ := ctlDevice(t)
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, pd)
	dx, err := ctx.QueryDeviceEx()
	require.NoError(t, err)

	mr, err := pd.Alloc(1<<16, hand.AccessLocalWrite|hand.AccessOnDemand)
	if dx.ODPCaps.GeneralCaps&1 != 0 {
		require.NoError(t, err, "the device reports ODP")
		require.NoError(t, mr.Close())
	} else {
		require.ErrorIs(t, err, hand.ErrNotSupported)
		require.ErrorContains(t, err, "on-demand paging")
	}

	fd, err := ctlMemfd(t)
	require.NoError(t, err)
	_, err = pd.RegisterDmabuf(fd, 0, 4096, 0, hand.AccessLocalWrite)
	require.Error(t, err, "a memfd is no dma-buf")
	t.Log(err)
}

func ctlMemfd(t *testing.T) (int, error) {
	name := []byte("goverbs\x00")
	// Go's syscall package names memfd_create on arm64 (279), not amd64.
	nr := map[string]uintptr{"amd64": 319, "arm64": 279}[runtime.GOARCH]
	if nr == 0 {
		t.Fatalf("no memfd_create system call number for GOARCH %s: add it here", runtime.GOARCH)
	}
	fd, _, e := syscall.Syscall(nr, uintptr(unsafe.Pointer(&name[0])), 0, 0)
	if e != 0 {
		return -1, e
	}
	syscall.Ftruncate(int(fd), 4096)
	t.Cleanup(func() { syscall.Close(int(fd)) })
	return int(fd), nil
}

// Registration past RLIMIT_MEMLOCK fails with ENOMEM and an error that says
// how to raise the limit. The VM runs tests as root, whose CAP_IPC_LOCK
// overrides the limit, so the registering thread drops that capability
// (capabilities are per thread) and the process lowers its limit.
func TestControlMemlockLimit(t *testing.T) {
	ctx, _ := ctlDevice(t)
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, pd)

	soft, hard, err := hand.MemlockLimit()
	require.NoError(t, err)
	t.Logf("RLIMIT_MEMLOCK soft %d, hard %d", soft, hard)
	lim := syscall.Rlimit{Cur: 64 << 10, Max: hard}
	require.NoError(t, syscall.Setrlimit(8 /* RLIMIT_MEMLOCK */, &lim))
	defer syscall.Setrlimit(8, &syscall.Rlimit{Cur: soft, Max: hard})

	done := make(chan error)
	go func() {
		// The thread dies with this goroutine (never unlocked), so its
		// dropped capability goes with it.
		runtime.LockOSThread()
		if err := ctlDropIPCLock(); err != nil {
			done <- err
			return
		}
		mr, err := pd.Alloc(4<<20, hand.AccessLocalWrite)
		if err == nil {
			mr.Close()
		}
		done <- err
	}()
	err = <-done
	require.ErrorIs(t, err, syscall.ENOMEM)
	require.ErrorContains(t, err, "ibv_reg_mr: cannot allocate memory")
	require.ErrorContains(t, err, "RLIMIT_MEMLOCK allows 64 KiB")
	require.ErrorContains(t, err, "ulimit -l")
	t.Log(err)
}

// ctlDropIPCLock clears CAP_IPC_LOCK from the calling thread's effective set.
func ctlDropIPCLock() error {
	type header struct {
		version uint32
		pid     int32
	}
	type data struct{ effective, permitted, inheritable uint32 }
	h := header{version: 0x20080522} // _LINUX_CAPABILITY_VERSION_3
	var d [2]data
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&d[0])), 0); e != 0 {
		return e
	}
	const capIPCLock = 14
	d[0].effective &^= 1 << capIPCLock
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&d[0])), 0); e != 0 {
		return e
	}
	return nil
}
