#!/usr/bin/env bash
# headers/vendor.sh - refresh the vendored header closure from a fetched tree.
#
# Usage: headers/vendor.sh [-o DIR] VERSION
#
# Copies into DIR (default headers/vendored) exactly the headers of
# headers/rdma-core-VERSION (made by fetch.sh from the pinned packages) that
# infiniband/verbs.h, rdma/rdma_cma.h and rdma/rdma_verbs.h reach, as the C
# compiler resolves them, under DIR/include, with the Debian copyright files
# of the packages under DIR/LICENSES and the version in DIR/VERSION. The
# license texts that DIR/LICENSES already holds (GPL-2.0, Linux-syscall-note)
# are kept. The generated packages and every cgo preamble of the project
# include DIR/include: the machine's own rdma-core headers never matter.
#
# One edit is made to the copies: an include of another header of the
# closure (#include <infiniband/verbs_api.h>, <rdma/ib_user_verbs.h>) is
# rewritten quoted and relative to the including file ("verbs_api.h",
# "../rdma/ib_user_verbs.h"). GCC looks for a quoted include in the
# including file's directory before any -I directory, so the closure holds
# together whatever a site puts in CGO_CFLAGS, CGO_CPPFLAGS, CPATH or
# C_INCLUDE_PATH (an OFED install's -I/opt/.../include): the packages reach
# the vendored roots with #cgo CFLAGS: -iquote and #include "...". Headers
# outside the closure (the C library's, linux/) stay angle-bracketed.
#
# Offline: run `make headers` first. `make check-vendored` runs this into a
# temporary directory and compares.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$here/vendored
if [[ ${1:-} == -o ]]; then
	out=$2
	shift 2
fi
(($# == 1)) || { echo "usage: headers/vendor.sh [-o DIR] VERSION" >&2; exit 2; }
v=$1
tree=$here/rdma-core-$v
die() { printf 'vendor: %s\n' "$*" >&2; exit 1; }
[[ -f $tree/.stamp ]] || die "$tree is not a fetched tree: run make headers (or bash headers/fetch.sh $v)"

# The closure, as gcc resolves it with the tree searched first; files outside
# the tree (the C library's, linux/ and asm/) are not rdma-core's and stay out.
mapfile -t files < <(printf '#include <infiniband/verbs.h>\n#include <rdma/rdma_cma.h>\n#include <rdma/rdma_verbs.h>\n' |
	${CC:-gcc} -M -I "$tree" -x c - | tr ' \\' '\n\n' | grep "^$tree/" | sed "s|^$tree/||" | sort -u)
((${#files[@]})) || die "no header of $tree is reached from the roots"

stage=$(mktemp -d "${out%/}.tmp.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/include" "$stage/LICENSES"
# relinc FROM TO: TO (a path of the closure) as written in FROM's directory.
relinc() {
	local from=${1%/*} to=$2
	if [[ ${to%/*} == "$from" ]]; then
		printf '%s' "${to##*/}"
	else
		printf '../%s' "$to"
	fi
}
declare -A inclosure=()
for f in "${files[@]}"; do inclosure[$f]=1; done
for f in "${files[@]}"; do
	mkdir -p "$stage/include/$(dirname "$f")"
	cp "$tree/$f" "$stage/include/$f"
	script=()
	while read -r inc; do
		[[ -n ${inclosure[$inc]:-} ]] || continue
		script+=(-e "s|^\\([[:space:]]*#[[:space:]]*include[[:space:]]*\\)<${inc}>|\\1\"$(relinc "$f" "$inc")\"|")
	done < <(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*|\1|p' "$tree/$f" | sort -u)
	((${#script[@]} == 0)) || sed -i "${script[@]}" "$stage/include/$f"
	left=$(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*|\1|p' "$stage/include/$f" |
		while read -r inc; do [[ -z ${inclosure[$inc]:-} ]] || echo "$inc"; done)
	[[ -z $left ]] || die "$f: the rewrite left an include of the closure angle-bracketed: $left"
done
for f in "$tree"/.copyright/*; do
	cp "$f" "$stage/LICENSES/copyright.${f##*/}"
done
[[ -d $out/LICENSES ]] && for f in "$out"/LICENSES/*; do
	[[ ${f##*/} == copyright.* ]] || cp "$f" "$stage/LICENSES/"
done
printf '%s\n' "$v" >"$stage/VERSION"
chmod -R a+rX "$stage"
rm -rf "$out.old"
[[ -e $out ]] && mv "$out" "$out.old"
mv "$stage" "$out"
rm -rf "$out.old"
trap - EXIT
echo "vendor: rdma-core $v: ${#files[@]} headers in ${out#"$here/"}/include"
