package rsocket_test

import (
	"fmt"
	"io"
	"log"
	"net/http"

	"github.com/goverbs/goverbs/rsocket"
)

// An echo server on an rsocket listener; rstream's peers, and programs
// under LD_PRELOAD=librspreload.so, can dial it.
func ExampleListen() {
	l, err := rsocket.Listen("tcp", "192.0.2.1:7471") // the RDMA device's address
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for {
		c, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}

// A client: Write, then CloseWrite, and read the answer to io.EOF.
func ExampleDial() {
	c, err := rsocket.Dial("tcp", "192.0.2.1:7471")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello"))
	c.CloseWrite()
	b, err := io.ReadAll(c)
	fmt.Printf("%s %v\n", b, err)
}

// net/http serves on an rsocket listener unchanged.
func ExampleListener_http() {
	l, err := rsocket.Listen("tcp", "192.0.2.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello over RDMA")
	})))
}
