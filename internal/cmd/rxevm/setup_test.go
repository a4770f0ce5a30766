package main

import (
	"slices"
	"testing"
)

func TestMissingPackages(t *testing.T) {
	// dpkg-query -W -f='${Package}\t${db:Status-Abbrev}\n' output: installed,
	// removed with config left, and a package installed for two
	// architectures of which one is only half-installed.
	out := "qemu-system-x86\tii \nkmod\trc \nlibibverbs-dev\tii \nlibibverbs-dev\tiU \nperftest\tii \n"
	want := []string{"busybox-static", "kmod", "rdmacm-utils"}
	got := missingPackages([]string{"qemu-system-x86", "busybox-static", "kmod", "libibverbs-dev", "perftest", "rdmacm-utils"}, out)
	if !slices.Equal(got, want) {
		t.Errorf("missingPackages = %q, want %q", got, want)
	}
	if got := missingPackages(hostPackages, ""); !slices.Equal(got, hostPackages) {
		t.Errorf("with nothing installed, missing %q, want all of %q", got, hostPackages)
	}
}
