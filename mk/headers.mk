# mk/headers.mk - pinned rdma-core header trees (see headers/README.md).
# Included from the top-level Makefile; paths are relative to the repository root.
#
#   make headers    fetch/verify/extract every version in headers/manifest.tsv
#                   (a fast offline no-op when the trees are already up to date)
#   make vendor-headers
#                   refresh headers/vendored (committed: what the generated
#                   packages include) from the fetched HEADERS_VENDORED tree
#   make check-vendored
#                   fail if headers/vendored/include differs from what
#                   vendor-headers makes from the pinned packages
#   make since      refresh gen/since.tsv (committed: the oldest pinned
#                   release that declares each function, which make
#                   generate reads) from every fetched tree
#   make check-since
#                   fail if gen/since.tsv differs from what make since
#                   makes
#
# Each tree is an include directory, e.g. -I $(HEADERS_44).

HEADERS_44 := headers/rdma-core-44.0
HEADERS_56 := headers/rdma-core-56.1
# The release vendored in headers/vendored, which generated/ is made from.
HEADERS_VENDORED := 65.0

# Every release of the manifest, oldest first, and its tree.
PINNED_RELEASES := $(shell awk '!/^\#/ && NF { print $$1 }' headers/manifest.tsv | sort -u -V)
PINNED_TREES := $(addprefix headers/rdma-core-,$(PINNED_RELEASES))

.PHONY: headers vendor-headers check-vendored since check-since
headers:
	bash headers/fetch.sh

vendor-headers: headers
	bash headers/vendor.sh $(HEADERS_VENDORED)

check-vendored: headers
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	bash headers/vendor.sh -o "$$tmp/v" $(HEADERS_VENDORED) >/dev/null; \
	if ! diff -r "$$tmp/v/include" headers/vendored/include || ! cmp -s "$$tmp/v/VERSION" headers/vendored/VERSION; then \
		echo "check-vendored: headers/vendored differs from rdma-core $(HEADERS_VENDORED)'s pinned packages: run make vendor-headers and commit" >&2; exit 1; \
	fi; \
	echo "check-vendored: headers/vendored/include is rdma-core $(HEADERS_VENDORED)'s header closure, from the pinned packages"

since: headers
	$(GO) run ./cmd/verbsgen since -o gen/since.tsv $(PINNED_TREES)

check-since: headers
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) run ./cmd/verbsgen since -o "$$tmp/since.tsv" $(PINNED_TREES) || exit 1; \
	if ! diff -u gen/since.tsv "$$tmp/since.tsv"; then \
		echo "check-since: gen/since.tsv differs from what the pinned trees ($(PINNED_RELEASES)) declare: run make since and commit" >&2; exit 1; \
	fi; \
	echo "check-since: gen/since.tsv dates every function of the pinned releases $(PINNED_RELEASES)"
