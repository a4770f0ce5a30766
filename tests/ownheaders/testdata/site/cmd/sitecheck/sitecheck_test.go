// Package sitecheck uses goverbs' hand package and this site's own
// bindings in one program, on a real device: built on the host, run in the
// soft-RoCE VM.
package sitecheck

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/crecord"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"

	siteverbs "example.com/site/rdma/verbs"
)

func TestSiteBindingBesideHand(t *testing.T) {
	ctx, err := hand.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()

	// Both packages reach the one libibverbs the process loaded.
	if siteverbs.LibraryPath() == "" || siteverbs.LibraryPath() != verbs.LibraryPath() {
		t.Fatalf("library paths differ: site %q, goverbs %q", siteverbs.LibraryPath(), verbs.LibraryPath())
	}

	// hand's context, handed to the site package: the port it reports is
	// the one hand reports.
	sctx := crecord.As[siteverbs.Context](ctx.Raw())
	var attr siteverbs.PortAttr
	if err := siteverbs.QueryPort(sctx, 1, &attr); err != nil {
		t.Fatal(err)
	}
	want, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if attr.State != siteverbs.PortActive || uint32(attr.State) != uint32(want.State) || attr.ActiveMTU != siteverbs.MTU(want.ActiveMTU) {
		t.Fatalf("port 1 through the site package: state %d mtu %d; through hand: state %d mtu %d",
			attr.State, attr.ActiveMTU, want.State, want.ActiveMTU)
	}
	t.Logf("port 1 through the site package on hand's context: state %d, active MTU %d", attr.State, attr.ActiveMTU)

	// A function libibverbs exports and rdma-core's headers no longer declare.
	// No pinned release declares it, so its stub says whether the loaded
	// library has it.
	if p, err := siteverbs.GetSysfsPath(); err != nil || p == nil {
		t.Fatalf("ibv_get_sysfs_path: %v, %v", p, err)
	}

	// A function no libibverbs exports: an error naming it, not a crash.
	err = siteverbs.MyVendorOp(sctx, uint32(siteverbs.AccessSiteVendor))
	if !errors.Is(err, syscall.ENOSYS) || !strings.Contains(err.Error(), "ibv_my_vendor_op") ||
		!strings.Contains(err.Error(), "no rdma-core release goverbs pins declares it") {
		t.Fatalf("ibv_my_vendor_op: want ENOSYS naming the function and no pinned release, got %v", err)
	}
	t.Logf("ibv_my_vendor_op: %v", err)

	// The site's grown record and its new one are there, laid out.
	var ex siteverbs.DeviceAttrEx
	ex.SiteVendorCaps = 1
	var rec siteverbs.SiteVendorAttr
	rec.Cookie = 2
	t.Logf("site records: ibv_device_attr_ex.site_vendor_caps %d, ibv_site_vendor_attr.cookie %d", ex.SiteVendorCaps, rec.Cookie)
}
