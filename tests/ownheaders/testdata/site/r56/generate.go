// Package r56 holds bindings generated from rdma-core 56.1's headers
// (../include56), linked beside goverbs' own by ../foreign.
package r56

//go:generate go tool verbsgen -headers ../include56 -version 56.1 -cgo-include -out . -import example.com/site/r56
