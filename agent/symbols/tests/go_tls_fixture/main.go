// A Go binary that links crypto/tls.(*Conn).Write and .Read, built by the symbol engine's
// tests so their return sites can be checked against objdump. It is never run by the tests.
package main

import (
	"crypto/tls"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go_tls_fixture HOST:PORT")
		os.Exit(2)
	}
	conn, err := tls.Dial("tcp", os.Args[1], &tls.Config{MinVersion: tls.VersionTLS12})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("HEAD / HTTP/1.0\r\n\r\n")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	fmt.Println(n, err)
}
