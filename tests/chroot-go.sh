#!/usr/bin/env bash
# tests/chroot-go.sh ROOT DIR CMD [ARG...]: run CMD in directory DIR inside
# the root filesystem ROOT (one of rxevm -setup-root's), with the host's Go
# toolchain and module cache, so that what CMD builds is built with ROOT's C
# compiler, headers and libraries, and sees nothing of the host's /usr:
#
#   - rxe-matrix builds the test binaries for Debian 11 inside its root: a
#     binary linked on Debian 12 needs glibc 2.34 and does not start there
#     (gcc --sysroot is no way round it: the host gcc searches its own
#     library directories, the host's libc among them, before the sysroot's,
#     and the root's absolute symlinks point back into the host);
#   - nordma-build builds the repository in a root without rdma-core.
#
# DIR (read-write), the Go root and the module cache (both read-only) are
# bind-mounted at their own paths in a private mount namespace, with /proc,
# /dev and a tmpfs on /tmp, and vanish with it; their mount points are made
# in ROOT, inside the namespace, after the tmpfs: one under /tmp is made in
# it and vanishes too, where it was left in ROOT's /tmp, one per run. The
# build cache is ROOT's own (/root/.cache/go-build inside it):
# go keys cgo's cache entries by the compiler but not by the system headers,
# so the host's entries would let a build pass in ROOT that cannot. Modules
# come from the host's cache only (GOPROXY=off), which go mod download fills
# first when DIR is in a module. Needs root (or CAP_SYS_ADMIN)
# and unshare(1).
set -euo pipefail

if [ $# -lt 3 ]; then
	echo "usage: $0 ROOT DIR CMD [ARG...]" >&2
	exit 2
fi
root=$(realpath "$1") dir=$(realpath "$2")
shift 2
[ -x "$root/bin/sh" ] || { echo "chroot-go: $root is not a root filesystem (make rxe-roots builds them)" >&2; exit 1; }
[ "$root" != / ] || { echo "chroot-go: ROOT is the host's own /" >&2; exit 1; }

go=${GO:-go}
goroot=$("$go" env GOROOT)
modcache=$("$go" env GOMODCACHE)
# Inside, no module is downloaded (GOPROXY=off): those of DIR's module must
# be in the host's cache first, where a fresh machine has none until a go
# command fetched them (go mod download does nothing when they are there).
gomod=$(cd "$dir" && "$go" env GOMOD)
if [ -n "$gomod" ] && [ "$gomod" != /dev/null ]; then
	(cd "$dir" && "$go" mod download) || { echo "chroot-go: go mod download failed in $dir: the build inside would find no modules" >&2; exit 1; }
fi

# The second shell runs inside the new namespace: its mounts are private to
# it, so neither the host nor a concurrent run sees them.
exec unshare -m --propagation private /bin/sh -euc '
root=$1 dir=$2 goroot=$3 modcache=$4
shift 4
# The tmpfs first: mounted after them, it would hide a DIR (a clone), Go
# root or module cache under /tmp. Their mount points under /tmp are made
# on it.
mount -t tmpfs -o mode=1777 tmp "$root/tmp"
mkdir -p "$root$dir" "$root$goroot" "$root$modcache"
mount --bind "$dir" "$root$dir"
mount --bind -o ro "$goroot" "$root$goroot"
mount --bind -o ro "$modcache" "$root$modcache"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
exec chroot "$root" /usr/bin/env -i \
	PATH="$goroot/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
	HOME=/root TMPDIR=/tmp GOMODCACHE="$modcache" GOPROXY=off GOTOOLCHAIN=local \
	GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=1 \
	/bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$dir" "$@"
' chroot-go "$root" "$dir" "$goroot" "$modcache" "$@"
