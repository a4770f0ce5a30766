// Package r33 holds bindings generated from rdma-core 33.2's headers
// (../include33), linked beside goverbs' own by ../foreign.
package r33

//go:generate go tool verbsgen -headers ../include33 -version 33.2 -cgo-include -out . -import example.com/site/r33
