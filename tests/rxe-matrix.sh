#!/usr/bin/env bash
# tests/rxe-matrix.sh: make rxe-matrix (mk/rxe.mk sets the variables below).
# Runs the tests/rxe binaries in the soft-RoCE VM once per Debian release,
# each boot on that release's root (rxevm -root), so against its rdma-core
# userspace: libibverbs, librdmacm, the rxe provider and the C tools. An
# amd64 boot runs Debian 12's kernel (rxevm's pinned 6.1), but on a root
# that brings its own: trixie's (Debian 13's 6.12) and sid's (unstable's,
# 7.2 when measured). A release named NAME-arm64 is an
# arm64 root (rxevm -setup-root bookworm-arm64 or trixie-arm64): its
# binaries are cross-built for linux/arm64 with ARM64_CC, and rxevm boots
# it on qemu-system-aarch64 with the root's own kernel (6.1 and 6.12
# there). The binaries run with -test.short: the matrix proves the verbs
# on each release, and load tests (the concurrent-use ones) send fewer
# messages there than in make rxe-test. Prints one line per release, with the kernel the guest booted,
# again all together at the end:
#
#   rxe-matrix: rdma-core 56.1 (trixie, kernel 6.12.117+deb13-amd64): 160 tests ran (160 passed, 0 failed, 0 skipped); VM wall time 71.6s
#
# and fails if any release fails: a binary failed or did not build, no test
# ran, or one skipped (inside the VM nothing may skip).
#
#   RXE_MATRIX_RELEASES      releases, each a root of rxevm -setup-root, or
#                            bookworm for the host's own /
#   RXE_MATRIX_PKGS          packages whose test binaries run
#   RXE_MATRIX_CHROOT_BUILD  releases whose binaries are built inside their
#                            root (tests/chroot-go.sh), with its compiler and
#                            C library; the others run the binaries built on
#                            the host, once for all of them
#   RXE_MATRIX_TMPDIR        where the binaries go: it must be under the
#                            current directory, which the guest shares
#                            read-write whatever its root, as it shares
#                            nothing else of the host
#   ARM64_CC                 the C cross compiler for the arm64 binaries
#                            (aarch64-linux-gnu-gcc, from make deps)
#   RXEVM_FLAGS, GO          as for rxe-test
set -euo pipefail

GO=${GO:-go}
releases=${RXE_MATRIX_RELEASES:?} pkgs=${RXE_MATRIX_PKGS:?}
chroot_build=" ${RXE_MATRIX_CHROOT_BUILD:-} "
tmpdir=$(mkdir -p "${RXE_MATRIX_TMPDIR:?}" && realpath "$RXE_MATRIX_TMPDIR")
here=$(pwd -P)
case $tmpdir/ in
"$here"/*) ;;
*)
	echo "rxe-matrix: RXE_MATRIX_TMPDIR=$tmpdir is not under the current directory $here, the one directory of the host that a guest on another root sees" >&2
	exit 2
	;;
esac
read -ra rxevm_flags <<<"${RXEVM_FLAGS:-}"

dir=$(mktemp -d "$tmpdir/rxe-matrix.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$GO" build -o "$dir/rxevm" ./internal/cmd/rxevm
"$GO" list -f '{{.ImportPath}} {{.Dir}}' $pkgs >"$dir/pkgs"

# build KEY ROOT: the test binaries, built on the host (ROOT empty) or in
# ROOT, into $dir/KEY with the script that runs them in the guest; once per
# KEY. KEY arm64 cross-builds them on the host. The script prints the root's
# libibverbs1 version first: dpkg's, or, in a root that was only unpacked
# and has no dpkg database, the head of the package's changelog; then the
# release of the kernel the guest booted, whose rxe the tests meet.
build() {
	local key=$1 root=$2 out=$dir/$1 pkg pkgdir bin
	[ -f "$out/run.sh" ] && return 0
	mkdir -p "$out"
	# shellcheck disable=SC2016 # expanded in the guest
	printf '%s\n' 'v=$(dpkg-query -W -f="\${Version}" libibverbs1 2>/dev/null)' \
		'[ -n "$v" ] || v=$(zcat /usr/share/doc/libibverbs1/changelog.Debian.gz 2>/dev/null | sed -n "1s/^[^(]*(\([^)]*\)).*/\1/p")' \
		'printf "rxe-matrix-libibverbs1: %s\n" "$v"' \
		'printf "rxe-matrix-kernel: %s\n" "$(uname -r)"' 'st=0' >"$out/run.tmp"
	# tests/rxe's sockets echo program (testdata/rsecho.c, run under
	# librspreload), built as the test binaries are: compiling it in the
	# emulated guest takes a minute or more, and the arm64 roots and
	# Debian 13's have no compiler.
	if [ -n "$root" ]; then
		tests/chroot-go.sh "$root" . cc -O2 -Wall -o "$out/rsecho" tests/rxe/testdata/rsecho.c || return 1
	elif [ "$key" = arm64 ]; then
		"${ARM64_CC:-aarch64-linux-gnu-gcc}" -O2 -Wall -o "$out/rsecho" tests/rxe/testdata/rsecho.c || return 1
	else
		cc -O2 -Wall -o "$out/rsecho" tests/rxe/testdata/rsecho.c || return 1
	fi
	printf 'export GOVERBS_RSECHO=%s\n' "$out/rsecho" >>"$out/run.tmp"
	while read -r pkg pkgdir; do
		bin=$out/$(echo "$pkg" | tr / _).test
		if [ -n "$root" ]; then
			tests/chroot-go.sh "$root" . "$GO" test -c -o "$bin" "$pkg" || return 1
		elif [ "$key" = arm64 ]; then
			GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC="${ARM64_CC:-aarch64-linux-gnu-gcc}" "$GO" test -c -o "$bin" "$pkg" || return 1
		else
			"$GO" test -c -o "$bin" "$pkg" || return 1
		fi
		[ -f "$bin" ] && printf '(cd "%s" && "%s" -test.v -test.short) || st=1\n' "$pkgdir" "$bin" >>"$out/run.tmp"
	done <"$dir/pkgs"
	echo 'exit $st' >>"$out/run.tmp"
	mv "$out/run.tmp" "$out/run.sh"
}

# guest_said KEY: what the guest printed after "rxe-matrix-KEY: " (build's
# script) in $log, or "?" when it said nothing.
guest_said() {
	local said
	said=$(grep -m 1 "^rxe-matrix-$1:" "$log") || { echo '?'; return; }
	said=${said#"rxe-matrix-$1:"}
	echo "${said# }"
}

st=0
: >"$dir/summary"
for rel in $releases; do
	line=
	if [ "$rel" = bookworm ]; then
		root=/
	elif ! root=$("$dir/rxevm" "${rxevm_flags[@]}" -setup-root "$rel"); then
		line="rxe-matrix: $rel: its root was not built (rxevm -setup-root $rel)"
	fi
	if [ -z "$line" ]; then
		key=host broot=
		case $chroot_build in *" $rel "*) key=$rel broot=$root ;; esac
		where=${broot:+inside $broot}
		where=${where:-on the host}
		case $rel in *-arm64) key=arm64 broot= where="on the host for linux/arm64" ;; esac
		echo "rxe-matrix: $rel: test binaries built $where"
		if ! build "$key" "$broot"; then
			line="rxe-matrix: $rel: the test binaries did not build $where"
		fi
	fi
	if [ -n "$line" ]; then
		echo "$line" | tee -a "$dir/summary"
		st=1
		continue
	fi

	echo "rxe-matrix: $rel: booting on root $root"
	log=$dir/$rel.log rc=0
	start=$(date +%s%N)
	{ "$dir/rxevm" "${rxevm_flags[@]}" -root "$root" -- sh "$dir/$key/run.sh" || echo $? >"$dir/$rel.rc"; } 2>&1 | tee "$log"
	end=$(date +%s%N)
	[ -f "$dir/$rel.rc" ] && rc=$(cat "$dir/$rel.rc")
	# "?" when the guest said nothing, "none" when its root has no libibverbs1.
	version=$(guest_said libibverbs1)
	case $version in
	'?') ;;
	*) version=${version%-*} version=${version:-none} ;; # less Debian's revision
	esac
	kernel=$(guest_said kernel)
	ran=$(grep -c '^=== RUN' "$log" || true)
	passed=$(grep -c '^ *--- PASS' "$log" || true)
	failed=$(grep -c '^ *--- FAIL' "$log" || true)
	skipped=$(grep -c '^ *--- SKIP' "$log" || true)
	ms=$(((end - start) / 1000000))
	line=$(printf 'rxe-matrix: rdma-core %s (%s, kernel %s): %d tests ran (%d passed, %d failed, %d skipped); VM wall time %d.%ds' \
		"$version" "$rel" "$kernel" "$ran" "$passed" "$failed" "$skipped" $((ms / 1000)) $((ms % 1000 / 100)))
	if [ "$rc" -ne 0 ]; then
		line="$line; FAILED (exit status $rc)"
	elif [ "$ran" -eq 0 ]; then
		line="$line; FAILED: no tests ran"
	elif [ "$skipped" -gt 0 ]; then
		line="$line; FAILED: tests skipped inside the VM, where nothing may skip"
	fi
	case $line in *FAILED*) st=1 ;; esac
	echo "$line" | tee -a "$dir/summary"
done

echo "rxe-matrix: per release:"
cat "$dir/summary"
exit $st
