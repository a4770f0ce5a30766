// Package rdma holds this site's bindings, generated from its own
// rdma-core headers (../include) into rdma/verbs and rdma/rdmacm.
package rdma

//go:generate go tool verbsgen -headers ../include -version 65.0+site -cgo-include -since-pinned -conventions ../verbsgen.conventions -out . -import example.com/site/rdma -layout ../layout -layout-import example.com/site/layout
