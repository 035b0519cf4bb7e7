// gotls: an HTTPS server and client over Go's crypto/tls, for sonde's Go TLS tests.
//
//	gotls server                 serve HTTPS on 127.0.0.1 (a free port, printed as "listening PORT");
//	                             GET /status/CODE answers with that status
//	gotls client PORT CODE...    one HTTP/1.1 keep-alive connection, one GET per CODE, in order;
//	                             prints "done N" and exits
//	gotls load PORT SECONDS RATE GET /status/200 at RATE requests per second for SECONDS
//	gotls echo N SIZE            N round trips of SIZE bytes over one TLS connection to an
//	                             in-process echo server; prints nanoseconds per round trip
//	                             (each is 2 Writes and 2 Reads through crypto/tls)
//
// The certificate is generated at start-up (no files, no network). HTTP/2 is switched off so
// every exchange is HTTP/1.1 unless -h2 is given to both sides. GOTLS_START_DELAY_MS delays a
// client's first request (an agent instruments a new process a few ms after its exec; a test
// that counts every request must not race that).
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func certificate() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	check(err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sonde-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	check(err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func startDelay() {
	if ms, err := strconv.Atoi(os.Getenv("GOTLS_START_DELAY_MS")); err == nil && ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	h2 := flag.Bool("h2", false, "use HTTP/2")
	flag.Parse()
	args := flag.Args()
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: gotls [-h2] server | gotls [-h2] client PORT CODE...")
		os.Exit(2)
	}
	switch args[0] {
	case "server":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		check(err)
		cfg := &tls.Config{Certificates: []tls.Certificate{certificate()}}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
			if err != nil {
				code = http.StatusBadRequest
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, "status %d\n", code)
		})}
		if *h2 {
			cfg.NextProtos = []string{"h2"}
		} else {
			srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		}
		fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)
		check(srv.Serve(tls.NewListener(ln, cfg)))
	case "client":
		if len(args) < 3 {
			fmt.Fprintln(os.Stderr, "usage: gotls client PORT CODE...")
			os.Exit(2)
		}
		tr := &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			ForceAttemptHTTP2: *h2,
			MaxIdleConns:      1,
		}
		if !*h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		client := &http.Client{Transport: tr}
		startDelay()
		for _, code := range args[2:] {
			resp, err := client.Get("https://127.0.0.1:" + args[1] + "/status/" + code)
			check(err)
			_, err = io.Copy(io.Discard, resp.Body)
			check(err)
			resp.Body.Close()
		}
		fmt.Printf("done %d\n", len(args)-2)
	case "load":
		if len(args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: gotls load PORT SECONDS RATE")
			os.Exit(2)
		}
		seconds, err := strconv.Atoi(args[2])
		check(err)
		rate, err := strconv.Atoi(args[3])
		check(err)
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
		client := &http.Client{Transport: tr}
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		n := 0
		for end := time.Now().Add(time.Duration(seconds) * time.Second); time.Now().Before(end); n++ {
			<-tick.C
			resp, err := client.Get("https://127.0.0.1:" + args[1] + "/status/200")
			check(err)
			_, err = io.Copy(io.Discard, resp.Body)
			check(err)
			resp.Body.Close()
		}
		fmt.Printf("done %d\n", n)
	case "echo":
		if len(args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: gotls echo N SIZE")
			os.Exit(2)
		}
		n, err := strconv.Atoi(args[1])
		check(err)
		size, err := strconv.Atoi(args[2])
		check(err)
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{certificate()}})
		check(err)
		go func() {
			c, err := ln.Accept()
			check(err)
			buf := make([]byte, size)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		check(err)
		buf := make([]byte, size)
		start := time.Now()
		for i := 0; i < n; i++ {
			_, err := c.Write(buf)
			check(err)
			_, err = io.ReadFull(c, buf)
			check(err)
		}
		fmt.Println(time.Since(start).Nanoseconds() / int64(n))
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", args[0])
		os.Exit(2)
	}
}
