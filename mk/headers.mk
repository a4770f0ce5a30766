# mk/headers.mk - pinned rdma-core header trees (see headers/README.md).
# Included from the top-level Makefile; paths are relative to the repository root.
#
#   make headers    fetch/verify/extract every version in headers/manifest.tsv
#                   (a fast offline no-op when the trees are already up to date)
#
# Each tree is an include directory, e.g. -I $(HEADERS_44).

HEADERS_44 := headers/rdma-core-44.0
HEADERS_56 := headers/rdma-core-56.1

.PHONY: headers
headers:
	bash headers/fetch.sh
