#!/usr/bin/env bash
# headers/fetch.sh - materialise the pinned rdma-core header trees.
#
# Usage: headers/fetch.sh [VERSION...]      (default: every version in the manifest)
#
# For each rdma-core VERSION listed in headers/manifest.tsv this script
#   1. does nothing if headers/rdma-core-VERSION/.stamp already holds exactly the
#      manifest lines for VERSION (fully offline);
#   2. otherwise downloads the pinned Debian .debs with `apt-get download`, using a
#      PRIVATE apt configuration under headers/.cache/apt/ (the machine's /etc/apt
#      is only read, never written), and caches them in headers/.cache/debs/.
#      Each package=version is looked for in the manifest's suite, then in the
#      suites where it may live on after that suite moves on (candidate_suites:
#      testing for sid; -updates, -security, -proposed-updates and the next
#      release for a release); if none lists it, the script says so and how to
#      move the pin;
#   3. checks each .deb's sha256 against the manifest;
#   4. extracts the packages' usr/include into headers/rdma-core-VERSION/ (an
#      include directory: -I headers/rdma-core-VERSION), swapping it into place
#      with renames, and writes .stamp last.
#
# No host name or URL is stored in the repository: the Debian archive URI is taken
# at run time from the machine's own apt sources.  Needs bash, apt-get, dpkg-deb
# and coreutils/awk/grep (all present on Debian).
#
# Environment overrides (mainly for testing):
#   HEADERS_MANIFEST       manifest to read        (default: headers/manifest.tsv)
#   HEADERS_CACHE          cache directory          (default: headers/.cache)
#   HEADERS_DEBIAN_MIRROR  Debian archive URI to use instead of the one found in
#                          the machine's apt sources
#   HEADERS_DEBIAN_SECURITY_MIRROR
#                          the same for Debian's security archive (the
#                          <release>-security suites)
#   HEADERS_KEYRING        keyring that verifies the indexes (default: Debian's)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
manifest=${HEADERS_MANIFEST:-$here/manifest.tsv}
cache=${HEADERS_CACHE:-$here/.cache}
debs=$cache/debs
arch=amd64
keyring=${HEADERS_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
# Suites that identify the main Debian archive in the host's sources (the manifest
# suites are added at run time).  "bookworm-security" etc. never match.
debian_suites='bullseye bookworm trixie forky duke sid oldstable stable testing unstable'

log() { printf 'headers: %s\n' "$*"; }
die() { printf 'headers: %s\n' "$*" >&2; exit 1; }

[[ -r $manifest ]] || die "manifest not found: $manifest"
manifest_name=$manifest
[[ $manifest == "$here/manifest.tsv" ]] && manifest_name=headers/manifest.tsv
# The suites the manifest names, space-separated.
manifest_suites=$(awk -F'\t' '!/^[[:space:]]*(#|$)/ { print $2 }' "$manifest" | sort -u | paste -sd' ')
for tool in apt-get dpkg-deb sha256sum; do
	command -v "$tool" >/dev/null || die "required tool not found: $tool"
done

# manifest_lines VERSION: the manifest's data lines for VERSION (no comments/blanks).
manifest_lines() {
	awk -F'\t' -v v="$1" '!/^[[:space:]]*(#|$)/ && $1 == v' "$manifest"
}

# all_versions: every version in the manifest, in order of first appearance.
all_versions() {
	awk -F'\t' '!/^[[:space:]]*(#|$)/ && !seen[$1]++ { print $1 }' "$manifest"
}

# deb_filename PKG VERSION: the file name `apt-get download` gives a package
# (an epoch's ':' is written as %3a), less its architecture, which is $arch
# or "all".
deb_filename() {
	printf '%s_%s\n' "$1" "${2//:/%3a}"
}

# sha256_of FILE
sha256_of() {
	local sum
	read -r sum _ < <(sha256sum "$1")
	printf '%s\n' "$sum"
}

# --- Discovering the Debian archive URI from the host's apt sources ----------

# host_debian_uri [SUITE...]: print the first URI of an enabled "deb" source
# whose suites include a plain Debian release suite (e.g. "bookworm", not
# "bookworm-security").
host_debian_uri() {
	local words
	read -ra words <<<"$debian_suites $*"
	host_uri_matching "^($(IFS='|' && printf '%s' "${words[*]}"))\$"
}

# host_uri_matching RE: print the first URI of an enabled "deb" source one of
# whose suites matches the extended regular expression RE.
host_uri_matching() {
	local re=$1 uri f

	# deb822 *.sources files ("Types:", "URIs:", "Suites:", "Enabled:" fields).
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -r $f ]] || continue
		uri=$(awk -v re="$re" '
			function flush(   n, i, s, u) {
				if (!done && types ~ /(^|[[:space:]])deb([[:space:]]|$)/ && tolower(enabled) != "no") {
					n = split(suites, s, /[[:space:]]+/)
					for (i = 1; i <= n; i++)
						if (s[i] ~ re) { split(uris, u, /[[:space:]]+/); print u[1]; done = 1; break }
				}
				types = suites = uris = enabled = field = ""
			}
			/^#/ { next }
			/^[[:space:]]*$/ { flush(); next }
			/^[[:space:]]/ {                      # continuation line
				if (field == "types") types = types " " $0
				else if (field == "uris") uris = uris " " $0
				else if (field == "suites") suites = suites " " $0
				next
			}
			{
				field = tolower(substr($0, 1, index($0, ":") - 1))
				val = substr($0, index($0, ":") + 1)
				gsub(/^[[:space:]]+|[[:space:]]+$/, "", val)
				if (field == "types") types = val
				else if (field == "uris") uris = val
				else if (field == "suites") suites = val
				else if (field == "enabled") enabled = val
			}
			END { flush() }' "$f")
		[[ -n $uri ]] && { printf '%s\n' "$uri"; return 0; }
	done

	# One-line style: "deb [options] URI SUITE COMPONENT...".
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -r $f ]] || continue
		uri=$(awk -v re="$re" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) ~ re) { print $i; exit }
			}' "$f")
		[[ -n $uri ]] && { printf '%s\n' "$uri"; return 0; }
	done
	return 1
}

debian_uri=
# debian_uri_lookup: set $debian_uri once (only needed when downloading).
debian_uri_lookup() {
	[[ -n $debian_uri ]] && return 0
	if [[ -n ${HEADERS_DEBIAN_MIRROR:-} ]]; then
		debian_uri=$HEADERS_DEBIAN_MIRROR
	else
		local suites
		mapfile -t suites < <(awk -F'\t' '!/^[[:space:]]*(#|$)/ { print $2 }' "$manifest" | sort -u)
		debian_uri=$(host_debian_uri "${suites[@]}") ||
			die "no Debian archive (a 'deb' source with suite bookworm, trixie, ...) found in /etc/apt/sources.list{,.d}; set HEADERS_DEBIAN_MIRROR"
	fi
}

# security_uri_lookup: set $security_uri (Debian's security archive, which
# serves the "<release>-security" suites) from HEADERS_DEBIAN_SECURITY_MIRROR
# or the machine's source for some "<release>-security" suite; empty if none.
security_uri= security_uri_done=
security_uri_lookup() {
	[[ -n $security_uri_done ]] && return 0
	security_uri_done=1
	if [[ -n ${HEADERS_DEBIAN_SECURITY_MIRROR:-} ]]; then
		security_uri=$HEADERS_DEBIAN_SECURITY_MIRROR
	else
		security_uri=$(host_uri_matching '^[a-z]+-security$') || security_uri=
	fi
}

# --- Where a pinned version may still be -------------------------------------

# Debian's archive keeps a package version only while some suite lists it.  A
# version pinned from unstable usually migrates to testing and stays there
# after unstable moves on; one pinned from a release may be in its -updates,
# -security or -proposed-updates suite, or unchanged in the next release.
# Releases, oldest first, and the codename of testing (update both when
# Debian releases testing).
releases='bullseye bookworm trixie forky duke'
testing_codename=forky

# candidate_suites SUITE: the suites to look for a version pinned in SUITE,
# SUITE first, one per line.
candidate_suites() {
	local suite=$1 r next=
	printf '%s\n' "$suite"
	case $suite in
	sid | unstable)
		printf '%s\n' "$testing_codename"
		return 0
		;;
	esac
	for r in $releases; do
		if [[ -n $next ]]; then next=$r; break; fi
		[[ $r == "$suite" ]] && next=.
	done
	[[ -n $next ]] || return 0 # not a release codename: only itself
	printf '%s\n' "$suite-updates" "$suite-security" "$suite-proposed-updates"
	[[ $next != . ]] && printf '%s\n' "$next"
	return 0
}

# --- Private apt configuration ------------------------------------------------

# apt_setup SUITE: create a private apt root for SUITE under $cache/apt/SUITE (one
# root per suite, so "pkg=version" can only resolve from that suite) and refresh
# its package index; on success export APT_CONFIG pointing at it.  Returns 1 with
# $apt_why set when the suite cannot be read (no security archive, apt-get
# update failed); dies if the keyring lacks the key of the manifest's own suite.
apt_why=
apt_setup() {
	local suite=$1 root=$cache/apt/$1 uri base=${1%%-*}
	[[ -r $keyring ]] || die "Debian archive keyring not found: $keyring (install debian-archive-keyring)"
	# OpenPGP user IDs are stored as plain text, e.g. "Debian Archive Automatic Signing Key (13/trixie)".
	# Unstable and testing have no key of their own: the current release keys
	# sign them.  Only the manifest's own suites are checked here; for the
	# others apt's signature check alone decides.
	if [[ $base != sid && $base != unstable && $base != testing && " $manifest_suites " == *" $suite "* ]]; then
		grep -aq "/$base)" "$keyring" ||
			die "keyring $keyring has no key for suite '$suite'; cannot verify its index (upgrade debian-archive-keyring)"
	fi
	if [[ $suite == *-security ]]; then
		security_uri_lookup
		[[ -n $security_uri ]] || {
			apt_why="skipped: no ${suite%-security} security archive (a 'deb' source with a <release>-security suite) in /etc/apt/sources.list{,.d}; set HEADERS_DEBIAN_SECURITY_MIRROR"
			return 1
		}
		uri=$security_uri
	else
		debian_uri_lookup
		uri=$debian_uri
	fi

	mkdir -p "$root"/etc/apt.conf.d "$root"/etc/sources.list.d "$root"/etc/preferences.d \
		"$root"/etc/trusted.gpg.d "$root"/lists/partial "$root"/cache/archives/partial
	: >"$root/etc/sources.list"
	: >"$root/status"
	cat >"$root/etc/sources.list.d/debian.sources" <<-EOF
		Types: deb
		URIs: $uri
		Suites: $suite
		Components: main
		Architectures: $arch
		Signed-By: $keyring
	EOF

	# APT_CONFIG is read before anything else; pointing Dir::Etc::main/parts away
	# from /etc/apt means none of the host's apt.conf(.d) is loaded (no hooks such
	# as APT::Update::Post-Invoke run).  Only the host's network settings (proxies,
	# Check-Valid-Until, ...) are copied over so downloads work as they do for apt.
	{
		cat <<-EOF
			Dir::Etc::main "/dev/null";
			Dir::Etc::parts "$root/etc/apt.conf.d";
			Dir::Etc::SourceList "$root/etc/sources.list";
			Dir::Etc::SourceParts "$root/etc/sources.list.d";
			Dir::Etc::Preferences "$root/etc/preferences";
			Dir::Etc::PreferencesParts "$root/etc/preferences.d";
			Dir::Etc::Trusted "$root/etc/trusted.gpg";
			Dir::Etc::TrustedParts "$root/etc/trusted.gpg.d";
			Dir::State "$root";
			Dir::State::Lists "$root/lists";
			Dir::State::Status "$root/status";
			Dir::Cache "$root/cache";
			APT::Architecture "$arch";
			APT::Architectures { "$arch"; };
			APT::Sandbox::User "$(id -un)";
			APT::Update::Error-Mode "any";
			Acquire::Languages "none";
			Acquire::GzipIndexes "true";
		EOF
		# Unstable's and testing's Release files are short-lived (valid a week)
		# and read as expired against a mirror that lags the clock; their
		# signatures are still checked.
		if [[ $suite == sid || $suite == unstable || $suite == testing || $suite == "$testing_codename" ]]; then
			echo 'Acquire::Check-Valid-Until "false";'
		fi
		env -u APT_CONFIG apt-config dump 2>/dev/null |
			grep -E '^Acquire::((http|https|ftp|socks)(::|[[:space:]])|(Check-Valid-Until|Check-Date|Retries|ForceIPv4|ForceIPv6)[[:space:]])' || true
	} >"$root/apt.conf"

	log "updating private apt index for $suite"
	if ! APT_CONFIG=$root/apt.conf apt-get -q update; then
		apt_why="apt-get update failed (see apt's messages above; $uri)"
		return 1
	fi
	export APT_CONFIG=$root/apt.conf
}

# apt_use SUITE: point APT_CONFIG at SUITE's private root, updating its index
# the first time in this run; 1 (with $apt_why) if it cannot be read.
declare -A apt_state=()
apt_use() {
	local suite=$1
	case ${apt_state[$suite]:-} in
	ok) export APT_CONFIG=$cache/apt/$suite/apt.conf ;;
	'')
		if apt_setup "$suite"; then
			apt_state[$suite]=ok
		else
			apt_state[$suite]=$apt_why
			return 1
		fi
		;;
	*) apt_why=${apt_state[$suite]}; return 1 ;;
	esac
}

# listed_versions PKG: the versions of PKG that the current suite's index lists.
listed_versions() {
	apt-cache madison "$1" 2>/dev/null | awk -F'|' '{ gsub(/[[:space:]]/, "", $2); if ($2 != "") print $2 }' | sort -u
}

# not_in_archive VERSION SUITE PKG DEBVERSION TRIED...: die saying that no suite
# tried lists PKG=DEBVERSION, what each had, and how to move the pin.
not_in_archive() {
	local v=$1 suite=$2 pkg=$3 ver=$4 t reachable=
	shift 4
	{
		printf 'headers: %s %s (rdma-core %s, suite %s in %s) is in none of the suites tried: %s\n' \
			"$pkg" "$ver" "$v" "$suite" "$manifest_name" "$(printf '%s\n' "$@" | cut -d: -f1 | paste -sd' ')"
		for t in "$@"; do
			printf 'headers:   %s\n' "$t"
			[[ $t == *": index lists "* ]] && reachable=1
		done
		if [[ -z $reachable ]]; then
			printf 'headers: no suite'"'"'s index could be read: a network or mirror problem rather than the pin (see apt'"'"'s messages above)\n'
		else
			cat <<-EOF
				headers: Debian's archive keeps a version only while a suite lists it: the pin has to move.
				headers:   1. In $manifest_name, give rdma-core $v's $pkg line a debversion that a suite lists now
				headers:      (above), that suite, and the .deb's sha256 (download it and run sha256sum; cross-check the
				headers:      SHA256 field of the signed index: APT_CONFIG=$cache/apt/$suite/apt.conf apt-cache show $pkg).
			EOF
			[[ $pkg == linux-libc-dev ]] || cat <<-EOF
				headers:      A new upstream release (not $v-*) is a new version instead: add its lines as
				headers:      headers/README.md says ("Adding a version") and move HEADERS_VENDORED if it replaces $v.
			EOF
			cat <<-EOF
				headers:   2. make headers
				headers:   3. If $v is the vendored release (HEADERS_VENDORED in mk/headers.mk): make vendor-headers
				headers:   4. make check-generated; commit the manifest with whatever it changed.
			EOF
		fi
	} >&2
	exit 1
}

# fetch_deb VERSION SUITE PKG DEBVERSION SHA256: ensure the verified .deb is in
# $debs and set $deb_path to it (a global rather than stdout, so that the apt
# state set up here persists).  The version is looked for in SUITE and then in
# the suites where it may live on (candidate_suites); it is the same file, with
# the same sha256, in whichever suite lists it.  Cached files are re-verified;
# downloads go through a temp dir and only enter the cache once their hash
# matches.
deb_path=
fetch_deb() {
	local v=$1 suite=$2 pkg=$3 ver=$4 want=$5 file got dl s from= have suites tried=()
	file=$debs/$(deb_filename "$pkg" "$ver").deb
	if [[ ! -f $file ]]; then
		mapfile -t suites < <(candidate_suites "$suite")
		for s in "${suites[@]}"; do
			if ! apt_use "$s"; then
				tried+=("$s: $apt_why")
				continue
			fi
			have=$(listed_versions "$pkg")
			if grep -qxF -- "$ver" <<<"$have"; then
				from=$s
				break
			fi
			tried+=("$s: index lists ${have:+$pkg }$(paste -sd' ' <<<"${have:-no $pkg}")")
		done
		[[ -n $from ]] || not_in_archive "$v" "$suite" "$pkg" "$ver" "${tried[@]}"
		if [[ $from != "$suite" ]]; then
			log "note: $suite does not list $pkg $ver; $from does (move the pin before $from moves on too: see headers/README.md)"
		fi
		dl=$(mktemp -d "$cache/dl.XXXXXX")
		log "downloading $pkg $ver ($from, $arch)"
		if ! (cd "$dl" && apt-get -q download "$pkg=$ver"); then
			rm -rf "$dl"
			die "apt-get download failed: $pkg version $ver, which $from's index lists ($arch); see apt's messages above"
		fi
		local got_file
		got_file=$(find "$dl" -maxdepth 1 -name "$(deb_filename "$pkg" "$ver")_*.deb" -print -quit)
		[[ -n $got_file ]] || { rm -rf "$dl"; die "apt-get download produced no $(deb_filename "$pkg" "$ver")_*.deb"; }
		got=$(sha256_of "$got_file")
		if [[ $got != "$want" ]]; then
			rm -rf "$dl"
			die "sha256 mismatch for ${got_file##*/}: want $want got $got"
		fi
		mv -f "$got_file" "$file"
		rm -rf "$dl"
	fi
	got=$(sha256_of "$file")
	[[ $got == "$want" ]] ||
		die "sha256 mismatch for $file: want $want got $got (cached file; delete it to re-download)"
	deb_path=$file
}

# --- Per-version work ---------------------------------------------------------

stage=
cleanup() { [[ -n $stage ]] && rm -rf "$stage"; return 0; }
trap cleanup EXIT

# fetch_version VERSION
fetch_version() {
	local v=$1 lines dest files=() pkgs=() f i suite pkg ver sha old
	lines=$(manifest_lines "$v")
	[[ -n $lines ]] || die "version $v is not in $manifest"
	dest=$here/rdma-core-$v

	if [[ -f $dest/.stamp ]] && printf '%s\n' "$lines" | cmp -s - "$dest/.stamp"; then
		log "rdma-core-$v up to date"
		return 0
	fi

	mkdir -p "$debs"
	while IFS=$'\t' read -r _ suite pkg ver sha; do
		[[ -n $suite && -n $pkg && -n $ver && $sha =~ ^[0-9a-f]{64}$ ]] ||
			die "malformed manifest line for $v: suite=$suite package=$pkg debversion=$ver sha256=$sha"
		fetch_deb "$v" "$suite" "$pkg" "$ver" "$sha"
		files+=("$deb_path")
		pkgs+=("$pkg")
	done <<<"$lines"

	# Everything is verified; build the new tree next to the destination (same
	# file system, so the renames below are atomic; the name matches .gitignore).
	stage=$(mktemp -d "$here/rdma-core-$v.tmp.XXXXXX")
	mkdir -p "$stage/include/.copyright"
	for i in "${!files[@]}"; do
		f=${files[$i]} pkg=${pkgs[$i]}
		dpkg-deb -x "$f" "$stage/$pkg"
		if [[ $pkg == linux-libc-dev ]]; then
			# The kernel's uapi package: only its rdma/ headers (the ones
			# rdma-core's include) are kept; linux/ and asm/ stay the C
			# library's, which every C toolchain has.
			[[ -d $stage/$pkg/usr/include/rdma ]] || die "no usr/include/rdma in $pkg $ver"
			mkdir -p "$stage/include/rdma"
			cp -a "$stage/$pkg/usr/include/rdma/." "$stage/include/rdma/"
		else
			[[ -d $stage/$pkg/usr/include ]] || die "no usr/include in $pkg $ver"
			cp -a "$stage/$pkg/usr/include/." "$stage/include/"
		fi
		# Debian's copyright file carries the packages' license terms.
		[[ -f $stage/$pkg/usr/share/doc/$pkg/copyright ]] &&
			cp "$stage/$pkg/usr/share/doc/$pkg/copyright" "$stage/include/.copyright/$pkg"
		rm -rf "${stage:?}/$pkg"
	done
	for f in infiniband/verbs.h rdma/rdma_cma.h; do
		[[ -f $stage/include/$f ]] || die "rdma-core $v packages lack $f"
	done

	# Swap in: any old tree is first renamed aside (so a stale .stamp can never sit
	# next to new files), the new tree is renamed into place, the stamp goes last.
	old=
	if [[ -e $dest ]]; then
		old=$stage/old
		mv "$dest" "$old"
	fi
	if ! mv "$stage/include" "$dest"; then
		[[ -n $old ]] && mv "$old" "$dest"
		die "could not move the new tree into $dest"
	fi
	printf '%s\n' "$lines" >"$dest/.stamp.tmp"
	mv "$dest/.stamp.tmp" "$dest/.stamp"
	rm -rf "$stage"
	stage=

	log "rdma-core-$v ready ($(find "$dest" -type f ! -name .stamp | wc -l) files)"
}

if (($# == 0)); then
	mapfile -t versions < <(all_versions)
	((${#versions[@]})) || die "no versions in $manifest"
	set -- "${versions[@]}"
fi

# Serialise concurrent runs (e.g. make -j) when flock(1) is available.
mkdir -p "$cache"
if command -v flock >/dev/null; then
	exec 9>"$cache/lock"
	flock 9
fi

for v in "$@"; do
	fetch_version "$v"
done
