// Command oci-registry serves an OCI distribution registry (go-containerregistry's in-memory
// implementation, the one its own tests use) on a loopback port, for the chart's `helm push` /
// `helm pull` tests (tests/deploy/test_chart_distribution.py). It prints "listening on ADDR" once
// the socket is open and serves until it is killed; blobs live in memory only.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	verbose := flag.Bool("v", false, "log every request on stderr")
	flag.Parse()
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "oci-registry: %v\n", err)
		os.Exit(1)
	}
	logs := io.Discard
	if *verbose {
		logs = os.Stderr
	}
	fmt.Printf("listening on %s\n", listener.Addr())
	handler := registry.New(registry.Logger(log.New(logs, "", log.LstdFlags)))
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	if err := server.Serve(listener); err != nil {
		fmt.Fprintf(os.Stderr, "oci-registry: %v\n", err)
		os.Exit(1)
	}
}
