// Command rsockethttp shows net/http over RDMA, unchanged: an http.Server
// serves from an rsocket.Listener, and an http.Client's Transport dials
// with an rsocket.Dialer. Nothing else differs from HTTP over TCP.
//
//	rsockethttp -listen 192.0.2.1:7471              server, until a client asks it to stop
//	rsockethttp [-size N] [-small N] 192.0.2.1:7471  client
//
// The client uploads -size bytes (64 MiB by default) and the server answers
// with their SHA-256; it downloads as many, which the server sends with
// their SHA-256 in a header; each side computes its own digest of what it
// sent and what it got, and they must agree. Then it makes -small small
// requests, 8 at a time, on the Transport's pooled connections, each
// answer checked; last, it asks the server to stop (POST /stop). The bytes
// come from a ChaCha8 generator with a seed the client chooses, so both
// sides can make the same ones.
//
// The address is one of the RDMA device's IP addresses (port 0 picks one).
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/rsocket"
)

func main() {
	listen := flag.String("listen", "", "be the server, listening on `ADDR:PORT`")
	size := flag.Int64("size", 64<<20, "bytes to upload, and to download")
	small := flag.Int("small", 1000, "small requests to make")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("rsockethttp: ")
	switch {
	case *listen != "" && flag.NArg() == 0:
		serve(*listen, *timeout)
	case *listen == "" && flag.NArg() == 1:
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		client(ctx, flag.Arg(0), *size, *small)
	default:
		log.Fatal("give -listen ADDR:PORT to serve, or the server's ADDR:PORT to be its client")
	}
}

// generator is the body of n bytes from seed.
func generator(seed uint64, n int64) io.Reader {
	var s [32]byte
	s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7] = byte(seed), byte(seed>>8), byte(seed>>16), byte(seed>>24), byte(seed>>32), byte(seed>>40), byte(seed>>48), byte(seed>>56)
	return io.LimitReader(rand.NewChaCha8(s), n)
}

func serve(addr string, timeout time.Duration) {
	l, err := rsocket.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	var conns, requests atomic.Int64
	stop := make(chan struct{})
	var once sync.Once
	mux := http.NewServeMux()
	// POST /upload: the SHA-256 and length of the body, as text.
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	// GET /download?seed=S&size=N: N bytes of generator S, their SHA-256
	// in a trailer, computed as they go out.
	mux.HandleFunc("GET /download", func(w http.ResponseWriter, r *http.Request) {
		seed, err1 := strconv.ParseUint(r.FormValue("seed"), 10, 64)
		size, err2 := strconv.ParseInt(r.FormValue("size"), 10, 64)
		if err1 != nil || err2 != nil || size < 0 {
			http.Error(w, "want seed and size, unsigned integers", http.StatusBadRequest)
			return
		}
		w.Header().Set("Trailer", "Body-Sha256")
		w.Header().Set("Content-Type", "application/octet-stream")
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(w, h), generator(seed, size)); err != nil {
			return // the client went away; nothing to tell it
		}
		w.Header().Set("Body-Sha256", hex.EncodeToString(h.Sum(nil)))
	})
	// GET /small?i=I: a line naming I.
	mux.HandleFunc("GET /small", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "small answer %s\n", r.FormValue("i"))
	})
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "stopping")
		once.Do(func() { close(stop) })
	})
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			mux.ServeHTTP(w, r)
		}),
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
		ReadHeaderTimeout: timeout,
	}
	fmt.Println("listening on", l.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case <-stop:
	case err := <-served:
		log.Fatal(err)
	case <-time.After(timeout):
		log.Fatalf("no client asked to stop within %v", timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Fatalf("shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	fmt.Printf("served %d requests on %d connections\n", requests.Load(), conns.Load())
}

func client(ctx context.Context, addr string, size int64, small int) {
	var dials atomic.Int64
	d := &rsocket.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		// The one change from HTTP over TCP.
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, address)
			if err == nil {
				dials.Add(1)
			}
			return c, err
		},
		MaxIdleConnsPerHost: 8,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	base := "http://" + addr
	seed := uint64(time.Now().UnixNano())

	// Upload.
	start := time.Now()
	h := sha256.New()
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/upload", io.TeeReader(generator(seed, size), h))
	if err != nil {
		log.Fatal(err)
	}
	req.ContentLength = size
	body := get(hc, req)
	if want := fmt.Sprintf("%d %x", size, h.Sum(nil)); body != want {
		log.Fatalf("upload: the server got %q, the client sent %q", body, want)
	}
	fmt.Printf("uploaded %d bytes in %v, SHA-256 %x on both sides\n", size, time.Since(start).Round(time.Millisecond), h.Sum(nil))

	// Download, with the other seed.
	start = time.Now()
	req, err = http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/download?seed=%d&size=%d", base, seed+1, size), nil)
	if err != nil {
		log.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	got := sha256.New()
	n, err := io.Copy(got, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		log.Fatalf("download: %s after %d bytes: %v", resp.Status, n, err)
	}
	want := sha256.New()
	io.Copy(want, generator(seed+1, size))
	gotSum, wantSum, sent := hex.EncodeToString(got.Sum(nil)), hex.EncodeToString(want.Sum(nil)), resp.Trailer.Get("Body-Sha256")
	if n != size || gotSum != wantSum || sent != wantSum {
		log.Fatalf("download: %d bytes of %d, SHA-256 %s; the server sent %s, the generator makes %s", n, size, gotSum, sent, wantSum)
	}
	fmt.Printf("downloaded %d bytes in %v, SHA-256 %s on both sides\n", n, time.Since(start).Round(time.Millisecond), gotSum)

	// Small requests, 8 at a time.
	start = time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/small?i=%d", base, i), nil)
				if err != nil {
					log.Fatal(err)
				}
				if body, want := get(hc, req), fmt.Sprintf("small answer %d\n", i); body != want {
					log.Fatalf("small request %d: %q, want %q", i, body, want)
				}
			}
		})
	}
	for i := range small {
		work <- i
	}
	close(work)
	wg.Wait()
	fmt.Printf("%d small requests in %v\n", small, time.Since(start).Round(time.Millisecond))

	req, err = http.NewRequestWithContext(ctx, "POST", base+"/stop", nil)
	if err != nil {
		log.Fatal(err)
	}
	if body := get(hc, req); body != "stopping\n" {
		log.Fatalf("stop: %q", body)
	}
	// The Transport may dial more than it uses: a request that finds an
	// idle connection before its dial completes takes that one.
	fmt.Printf("%d requests on at most %d connections\n", small+3, dials.Load())
}

// get does req and returns the body of its 200 answer.
func get(hc *http.Client, req *http.Request) string {
	resp, err := hc.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		log.Fatalf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, b)
	}
	return string(b)
}
