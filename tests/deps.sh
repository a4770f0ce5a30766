#!/usr/bin/env bash
# tests/deps.sh: install the Debian packages the build and the tests need,
# only those missing, so that a fresh Debian 12 machine can run `make test`.
# Run as root (CI and the development machines are); prints what it installs.
set -euo pipefail

# Build: gcc for cgo; nothing of rdma-core (the packages include the vendored
# headers in headers/vendored and load the libraries at run time).
# Tests: rdma-core's libraries (the fake-provider tests and the host half
# of the loader tests load them), and for the soft-RoCE VM qemu, busybox,
# kmod (depmod), iproute2 and rdma-core's tools and providers (rdma_rxe's
# user-space half lives in ibverbs-providers).
# linux/arm64: the cross compiler and arm64 glibc (make generate lays the types
# out for arm64 too; make test-arm64 cross-builds), qemu-aarch64 to run the
# layout test, and hand/'s and the loader's tests on the arm64 guest root.
packages=(
	gcc libc6-dev pkg-config
	libibverbs1 librdmacm1 ibverbs-providers
	ibverbs-utils rdmacm-utils perftest
	qemu-system-x86 busybox-static kmod iproute2
	ca-certificates
	gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#packages[@]} Debian packages present"
	exit 0
fi
echo "deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: need root to install ${missing[*]} (run: sudo apt-get install ${missing[*]})" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine's apt-daily may hold apt's locks when this runs: wait for
# them (apt-get, unlike apt, does not by default).
lock=(-o DPkg::Lock::Timeout=600)
apt-get "${lock[@]}" update -qq
apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: installed ${#missing[@]} packages"
