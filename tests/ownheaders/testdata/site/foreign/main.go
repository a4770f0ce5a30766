// Command foreign links goverbs' own bindings with bindings generated from
// two other rdma-core releases and from this site's headers, and prints
// the library each package loaded. It exits 1 unless every verbs package
// loaded one and the same libibverbs, and resolves ibv_open_device in it to
// one address, and every rdmacm package loaded the same librdmacm.
package main

import (
	"fmt"
	"os"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"

	cm33 "example.com/site/r33/rdmacm"
	v33 "example.com/site/r33/verbs"
	cm56 "example.com/site/r56/rdmacm"
	v56 "example.com/site/r56/verbs"
	siteverbs "example.com/site/rdma/verbs"
)

type loaded struct{ name, path string }

func main() {
	groups := [][]loaded{
		{{"goverbs verbs", verbs.LibraryPath()}, {"33.2 verbs", v33.LibraryPath()},
			{"56.1 verbs", v56.LibraryPath()}, {"site verbs", siteverbs.LibraryPath()}},
		{{"goverbs rdmacm", rdmacm.LibraryPath()}, {"33.2 rdmacm", cm33.LibraryPath()},
			{"56.1 rdmacm", cm56.LibraryPath()}},
	}
	ok := true
	for _, g := range groups {
		for _, l := range g {
			fmt.Printf("%s: %s\n", l.name, l.path)
			if l.path == "" || l.path != g[0].path {
				fmt.Fprintf(os.Stderr, "foreign: %s loaded %q, %s %q\n", l.name, l.path, g[0].name, g[0].path)
				ok = false
			}
		}
	}
	// The same function, resolved by each verbs package's own loader.
	addr := func(name string, f func(string) (uintptr, error)) {
		a, err := f("ibv_open_device")
		want, _ := verbs.Address("ibv_open_device")
		if err != nil || a == 0 || a != want {
			fmt.Fprintf(os.Stderr, "foreign: %s resolves ibv_open_device to %#x (%v), goverbs verbs to %#x\n", name, a, err, want)
			ok = false
		}
	}
	addr("33.2 verbs", v33.Address)
	addr("56.1 verbs", v56.Address)
	addr("site verbs", siteverbs.Address)
	if !ok {
		os.Exit(1)
	}
	fmt.Println("foreign: every package loaded the same library")
}
