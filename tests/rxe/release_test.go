package rxe

import (
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/libload"
)

// libVersion reads the rdma-core release from the file a library was
// loaded from: rdma-core installs libibverbs.so.1.14.44.0 for 44.0.
var libVersion = regexp.MustCompile(`\.so\.\d+\.\d+\.(\d+\.\d+)$`)

// loadedRelease is the rdma-core release of the loaded libibverbs, as
// [major, minor].
func loadedRelease(t *testing.T) (string, [2]int) {
	t.Helper()
	if err := verbs.Load(); err != nil {
		t.Fatalf("rdma-core is not installed here: %v", err)
	}
	path := verbs.LibraryPath()
	m := libVersion.FindStringSubmatch(path)
	if m == nil {
		t.Fatalf("cannot read the rdma-core release from %s", path)
	}
	return m[1], parseRelease(t, m[1])
}

func parseRelease(t *testing.T, v string) [2]int {
	t.Helper()
	maj, min, ok := strings.Cut(v, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("release %q is not MAJOR.MINOR", v)
	}
	return [2]int{a, b}
}

func newer(a, b [2]int) bool { return a[0] > b[0] || a[0] == b[0] && a[1] > b[1] }

// TestReleaseFunctions runs against whatever rdma-core is installed (the VM
// root's in make rxe-matrix): it prints the release, and every extern
// function the packages declare is either in the loaded libraries or fails
// with a *libload.MissingError that names it and a release newer than the
// loaded one. Nothing the installed release has is reported missing, and
// nothing is missing that the pins say it should have.
func TestReleaseFunctions(t *testing.T) {
	release, loaded := loadedRelease(t)
	t.Logf("rdma-core %s: libibverbs %s, librdmacm %s", release, filepath.Base(verbs.LibraryPath()), filepath.Base(rdmacm.LibraryPath()))
	type pkg struct {
		name      string
		functions []string
		available func(string) error
	}
	for _, p := range []pkg{{"verbs", verbs.Functions(), verbs.Available}, {"rdmacm", rdmacm.Functions(), rdmacm.Available}} {
		var missing []string
		for _, fn := range p.functions {
			err := p.available(fn)
			if err == nil {
				continue
			}
			var me *libload.MissingError
			if !errors.As(err, &me) || !errors.Is(err, libload.ErrNotSupported) || !errors.Is(err, syscall.ENOSYS) {
				t.Errorf("%s: Available = %v, want nil or a *libload.MissingError", fn, err)
				continue
			}
			if me.Function != fn || !strings.Contains(err.Error(), fn) {
				t.Errorf("%s: the error names %q: %v", fn, me.Function, err)
			}
			if me.Since == "" || !newer(parseRelease(t, me.Since), loaded) {
				t.Errorf("%s is missing from rdma-core %s, but the pins say %q has it", fn, release, me.Since)
			}
			missing = append(missing, fn+" ("+me.Since+")")
		}
		t.Logf("package %s: %d of %d functions in the installed library; missing: %s",
			p.name, len(p.functions)-len(missing), len(p.functions), strings.Join(missing, ", "))
	}
}

// TestReleaseQueryPortGrownStruct measures what the installed library does
// with a struct ibv_port_attr of the vendored headers' size (56 bytes since
// rdma-core 50; 52 before): the header's inline memsets or passes
// sizeof(*attr), so the library must fill what it knows and leave the rest
// zero, never garbage. The struct is filled with 0xff first so that an
// untouched byte shows.
func TestReleaseQueryPortGrownStruct(t *testing.T) {
	e := openVerbs(t)
	release, _ := loadedRelease(t)
	var a verbs.PortAttr
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a))
	for i := range raw {
		raw[i] = 0xff
	}
	if err := verbs.QueryPort(e.ctx, 1, &a); err != nil {
		t.Fatalf("ibv_query_port: %v", err)
	}
	t.Logf("rdma-core %s, sizeof(struct ibv_port_attr) %d: state %d, active_mtu %d, gid_tbl_len %d, active_speed %d, active_speed_ex %d; bytes 52..55: % x",
		release, len(raw), a.State, a.ActiveMTU, a.GIDTblLen, a.ActiveSpeed, a.ActiveSpeedEx, raw[52:56])
	if a.State != verbs.PortActive {
		t.Errorf("state %d, want PORT_ACTIVE", a.State)
	}
	if a.ActiveMTU < verbs.MTU256 || a.ActiveMTU > verbs.MTU4096 {
		t.Errorf("active_mtu %d is not an MTU", a.ActiveMTU)
	}
	if a.ActiveSpeedEx == 0xffffffff {
		t.Errorf("active_speed_ex was left untouched (0xff bytes) by rdma-core %s: a Go reader would see garbage", release)
	}
}

// seenWorkingSince is the oldest pinned rdma-core release whose rxe
// provider was measured to do everything tests/rxe asks of it (44.0); 33.2's
// has no extended CQs and no memory windows, and takes receives on a QP in
// RESET. A test reaching such a feature checks the older behaviour
// explicitly where releaseBefore(t, seenWorkingSince) holds.
const seenWorkingSince = "44.0"

// releaseBefore reports whether the loaded rdma-core is older than v.
func releaseBefore(t *testing.T, v string) bool {
	t.Helper()
	_, loaded := loadedRelease(t)
	return newer(parseRelease(t, v), loaded)
}

// requireNotSupportedBefore accepts err, on a release older than
// seenWorkingSince, only as a clear "not supported" naming verb; it reports
// whether the caller must stop there. On newer releases it fails on any
// error.
func requireNotSupportedBefore(t *testing.T, err error, verb string) bool {
	t.Helper()
	if err == nil {
		return false
	}
	release, _ := loadedRelease(t)
	if !releaseBefore(t, seenWorkingSince) {
		t.Fatalf("rdma-core %s: %v", release, err)
	}
	if !errors.Is(err, hand.ErrNotSupported) || !strings.Contains(err.Error(), verb) {
		t.Fatalf("rdma-core %s: %v, want hand.ErrNotSupported naming %s", release, err, verb)
	}
	t.Logf("rdma-core %s (older than %s) does not do this, and says so: %v", release, seenWorkingSince, err)
	return true
}
