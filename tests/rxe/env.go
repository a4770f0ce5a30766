// Package rxe holds the integration tests that need a real verbs device.
// They run inside the throwaway soft-RoCE VM that `make rxe-test` boots with
// internal/cmd/rxevm, which names the device in the environment (RXE_DEVICE,
// RXE_GID_INDEX, RXE_ADDR, GOVERBS_IN_VM=1). Everywhere else they skip.
//
// Beside the tests, the package holds their setup: RequireDevice (env.go),
// the verbs-level objects made through the generated stubs
// (verbs_setup.go) and the rdma_cm ones (cm_setup.go).
package rxe

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// skipMessage is what a test outside the VM skips with.
const skipMessage = "needs a verbs device: GOVERBS_IN_VM=1 is not set, so this is not the soft-RoCE VM; " +
	"run `make rxe-test`, which boots one (internal/cmd/rxevm) and runs this package inside"

// RequireDevice returns the verbs device and the GID index (RoCE v2, IPv4)
// the test should use. Outside the VM it skips the test with skipMessage;
// inside, it fails the test if the device is not there.
func RequireDevice(t *testing.T) (device string, gidIndex int) {
	t.Helper()
	if os.Getenv("GOVERBS_IN_VM") != "1" {
		t.Skip(skipMessage)
	}
	device = os.Getenv("RXE_DEVICE")
	gidIndex, err := strconv.Atoi(os.Getenv("RXE_GID_INDEX"))
	if device == "" || err != nil {
		t.Fatalf("GOVERBS_IN_VM=1 but RXE_DEVICE=%q RXE_GID_INDEX=%q: run under internal/cmd/rxevm, which sets both",
			device, os.Getenv("RXE_GID_INDEX"))
	}
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", device)); err != nil {
		t.Fatalf("in the soft-RoCE VM but device %s is missing (%v): see rxevm's guest setup output", device, err)
	}
	return device, gidIndex
}
