// Command goverbs-devinfo prints the attributes of the RDMA devices in the
// shape of rdma-core's ibv_devinfo: -d picks a device, -i a port, -l lists
// the device names, -v adds device limits, port details and the GID table
// with each entry's type.
//
//	goverbs-devinfo -d rxe0 -v
//
// See package devinfo for what -v prints and what it leaves out.
package main

import (
	"os"

	"github.com/goverbs/goverbs/internal/devinfo"
)

func main() {
	os.Exit(devinfo.Main(os.Args[1:], os.Stdout, os.Stderr))
}
