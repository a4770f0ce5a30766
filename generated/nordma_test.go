package generated_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/libload"
	"github.com/goverbs/goverbs/verberr"
)

// requireNoRDMAKernel fails t unless this host is what the test is about:
// rdma-core's libraries installed and a kernel without RDMA support, which
// is every host the unit tests run on (the soft-RoCE tests run in a VM of
// their own). Elsewhere the functions would succeed, and a skip would hide
// that the test proved nothing.
func requireNoRDMAKernel(t *testing.T) {
	t.Helper()
	for _, dir := range []string{"/sys/class/infiniband_verbs", "/sys/class/infiniband"} {
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("this host has %s: its kernel supports RDMA, so the failures this test checks cannot happen here; run it on a host without RDMA (no ib_uverbs, no ib_core)", dir)
		}
	}
	if err := verbs.Load(); err != nil {
		t.Fatalf("libibverbs must be installed for this test (apt-get install libibverbs1): %v", err)
	}
	if err := rdmacm.Load(); err != nil {
		t.Fatalf("librdmacm must be installed for this test (apt-get install librdmacm1): %v", err)
	}
}

// On a kernel without RDMA, ibv_get_device_list fails with ENOSYS, which is
// also what the loader gives a function the library lacks: the generated
// stub tells them apart, and its error matches verberr.ErrNoRDMA and says
// what to do.
func TestGetDeviceListWithoutRDMA(t *testing.T) {
	requireNoRDMAKernel(t)
	var n int32
	list, err := verbs.GetDeviceList(&n)
	if list != nil {
		verbs.FreeDeviceList(list)
		t.Fatalf("ibv_get_device_list found %d devices on a host without /sys/class/infiniband", n)
	}
	if !errors.Is(err, verberr.ErrNoRDMA) || !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("ibv_get_device_list: %v; want ENOSYS matching verberr.ErrNoRDMA", err)
	}
	if errors.Is(err, libload.ErrNotSupported) || errors.Is(err, libload.ErrNoLibrary) {
		t.Errorf("ibv_get_device_list: %v reads as a missing function or library", err)
	}
	const want = "ibv_get_device_list: function not implemented (ENOSYS; this kernel has no RDMA support: no /sys/class/infiniband_verbs; load ib_uverbs and a driver)"
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if _, again := verbs.GetDeviceList(&n); again != err {
		t.Errorf("a second failure gave a new error (%v): the site does not keep it", again)
	}
}

// librdmacm finds no device (ucma_init's ENODEV) on the same host: its
// entry points' errors match verberr.ErrNoRDMA too.
func TestRDMACMWithoutRDMA(t *testing.T) {
	requireNoRDMAKernel(t)
	ch, err := rdmacm.CreateEventChannel()
	if ch != nil {
		rdmacm.DestroyEventChannel(ch)
		t.Fatal("rdma_create_event_channel succeeded on a host without RDMA")
	}
	const says = " (ENODEV; librdmacm found no RDMA device: this kernel has no RDMA support, or no device is set up; load ib_uverbs and a driver)"
	if !errors.Is(err, verberr.ErrNoRDMA) || !errors.Is(err, syscall.ENODEV) ||
		err.Error() != "rdma_create_event_channel: no such device"+says {
		t.Errorf("rdma_create_event_channel: %v; want ENODEV matching verberr.ErrNoRDMA, saying what it means", err)
	}
	var n int32
	devs, err := rdmacm.GetDevices(&n)
	if devs != nil {
		rdmacm.FreeDevices(devs)
		t.Fatalf("rdma_get_devices found %d devices on a host without RDMA", n)
	}
	if !errors.Is(err, verberr.ErrNoRDMA) || !errors.Is(err, syscall.ENODEV) ||
		err.Error() != "rdma_get_devices: no such device"+says {
		t.Errorf("rdma_get_devices: %v; want ENODEV matching verberr.ErrNoRDMA, saying what it means", err)
	}
}

// A function the installed library lacks fails with ENOSYS too, the
// loader's: that error names the missing function and never matches
// verberr.ErrNoRDMA, whatever the kernel.
func TestMissingFunctionIsNotNoRDMA(t *testing.T) {
	requireNoRDMAKernel(t)
	if verbs.Available("ibv_alloc_dmah") == nil {
		t.Skipf("the installed libibverbs (%s) has ibv_alloc_dmah (rdma-core 65.0): no missing function to call", verbs.LibraryPath())
	}
	_, err := verbs.AllocDmah(nil, nil) // a missing function fails before using its arguments
	if !errors.Is(err, syscall.ENOSYS) || !errors.Is(err, libload.ErrNotSupported) || errors.Is(err, verberr.ErrNoRDMA) {
		t.Errorf("ibv_alloc_dmah, missing: %v; want ENOSYS and libload.ErrNotSupported, not verberr.ErrNoRDMA", err)
	}
}
