package rxe

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/tests/internal/testkit"
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

// Registration past RLIMIT_MEMLOCK fails with ENOMEM and an error that
// names the limit, its value and how to raise it, and leaves nothing
// behind. The VM runs tests as root, whose CAP_IPC_LOCK overrides the
// limit, so the registering thread drops that capability (capabilities are
// per thread) and the process lowers its limit to 64 KiB. Injected: 16
// registrations of 4 MiB past it, PD.Alloc's and PD.Register's by turns.
// Measured: each fails; the process's pinned and locked memory (VmPin,
// VmLck), its open file descriptors, its address space (VmSize, which
// would grow by each leaked Alloc mapping) and the device's MR count are
// what they were before; a 16 KiB registration within the limit then
// works, pins its 16 KiB and counts one MR, and its Close gives both back.
func TestControlMemlockLimit(t *testing.T) {
	ctx, _ := ctlDevice(t)
	dev, _ := RequireDevice(t)
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	ctlCloseLater(t, pd)

	soft, hard, err := hand.MemlockLimit()
	require.NoError(t, err)
	t.Logf("RLIMIT_MEMLOCK soft %d, hard %d", soft, hard)
	lim := syscall.Rlimit{Cur: 64 << 10, Max: hard}
	require.NoError(t, syscall.Setrlimit(8 /* RLIMIT_MEMLOCK */, &lim))
	defer syscall.Setrlimit(8, &syscall.Rlimit{Cur: soft, Max: hard})

	caller, err := syscall.Mmap(-1, 0, 4<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer syscall.Munmap(caller)
	copy(caller, "caller memory")

	const tries, within = 16, 16 << 10
	type result struct {
		errs  []error
		after procMem // after the failed registrations
		mr    *hand.MR
		err   error // of the registration within the limit
	}
	before := readProcMem(t)
	mrsBefore := testkit.ResourceCounts(t, dev)["mr"]
	done := make(chan result)
	go func() {
		// The thread dies with this goroutine (never unlocked), so its
		// dropped capability goes with it.
		runtime.LockOSThread()
		var res result
		if res.err = ctlDropIPCLock(); res.err != nil {
			done <- res
			return
		}
		for i := range tries {
			var mr *hand.MR
			var err error
			if i%2 == 0 {
				mr, err = pd.Alloc(4<<20, hand.AccessLocalWrite)
			} else {
				mr, err = pd.Register(caller, hand.AccessLocalWrite)
			}
			if err == nil {
				mr.Close()
			}
			res.errs = append(res.errs, err)
		}
		res.after = readProcMem(t)
		res.mr, res.err = pd.Alloc(within, hand.AccessLocalWrite)
		done <- res
	}()
	res := <-done
	require.NoError(t, res.err, "a registration within the limit after the failures")
	mid := readProcMem(t)
	mrsMid := testkit.ResourceCounts(t, dev)["mr"]
	res.mr.Bytes()[0] = 1
	require.NoError(t, res.mr.Close())
	after := readProcMem(t)
	mrsAfter := testkit.ResourceCounts(t, dev)["mr"]

	require.Len(t, res.errs, tries)
	for i, err := range res.errs {
		require.ErrorIs(t, err, syscall.ENOMEM, "registration %d", i)
		require.ErrorContains(t, err, "ibv_reg_mr: cannot allocate memory")
		require.ErrorContains(t, err, "registering 4194304 bytes pins them")
		require.ErrorContains(t, err, "RLIMIT_MEMLOCK allows 64 KiB")
		require.ErrorContains(t, err, "ulimit -l")
		require.ErrorContains(t, err, "/etc/security/limits.conf")
		require.ErrorContains(t, err, "LimitMEMLOCK=infinity")
	}
	t.Log(res.errs[0])
	require.Equal(t, "caller memory", string(caller[:13]), "a failed Register leaves the caller's memory as it was")

	t.Logf("before: %v, %d MRs; after %d failed registrations: %v; with a %d KiB MR open: %v, %d MRs; after its Close: %v, %d MRs",
		before, mrsBefore, tries, res.after, within>>10, mid, mrsMid, after, mrsAfter)
	require.Equal(t, before.pinKB, res.after.pinKB, "VmPin after the failed registrations")
	require.Equal(t, before.lockKB, res.after.lockKB, "VmLck after the failed registrations")
	require.Equal(t, before.fds, res.after.fds, "open fds after the failed registrations")
	// Each leaked PD.Alloc mapping would add 4 MiB: four of the eight
	// leaked would be 16 MiB, more than the runtime grows by here.
	require.Less(t, res.after.sizeKB-before.sizeKB, int64(16<<10), "VmSize grew: PD.Alloc's mappings leaked")
	require.Equal(t, before.pinKB+within>>10, mid.pinKB, "the MR within the limit pins its pages (VmPin)")
	require.Equal(t, mrsBefore+1, mrsMid, "the MR within the limit is the device's one more")
	require.Equal(t, before.pinKB, after.pinKB, "VmPin after its Close")
	require.Equal(t, before.fds, after.fds, "open fds at the end")
	require.Equal(t, mrsBefore, mrsAfter, "the device's MR count at the end")
}

// procMem is what /proc/self shows of the process's memory and files.
type procMem struct {
	pinKB, lockKB, sizeKB int64 // VmPin, VmLck, VmSize
	fds                   int   // entries of /proc/self/fd
}

func (m procMem) String() string {
	return fmt.Sprintf("VmPin %d kB, VmLck %d kB, VmSize %d kB, %d fds", m.pinKB, m.lockKB, m.sizeKB, m.fds)
}

// readProcMem reads procMem; t.Errorf, not Fatal, so that it may run on
// another goroutine.
func readProcMem(t *testing.T) procMem {
	var m procMem
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Errorf("reading /proc/self/status: %v", err)
		return m
	}
	fields := map[string]*int64{"VmPin:": &m.pinKB, "VmLck:": &m.lockKB, "VmSize:": &m.sizeKB}
	seen := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" && fields[f[0]] != nil {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Errorf("/proc/self/status: %q: %v", line, err)
			}
			*fields[f[0]] = v
			seen++
		}
	}
	if seen != len(fields) {
		t.Errorf("/proc/self/status has %d of VmPin, VmLck and VmSize:\n%s", seen, b)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Errorf("reading /proc/self/fd: %v", err)
	}
	m.fds = len(ents)
	return m
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
