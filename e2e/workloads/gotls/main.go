// gotls: an HTTPS server and client over Go's crypto/tls, for sonde's Go TLS tests.
//
//	gotls [-log] server          serve HTTPS on 127.0.0.1 (a free port, printed as "listening PORT");
//	                             with -log, prints "request METHOD STATUS PROTO" per request;
//	                             /status/CODE answers with that status (any method), after reading
//	                             the body; with the header "Early: 1" it sends 103 Early Hints first
//	gotls [-await FILE] client PORT REQ...
//	                             one HTTP/1.1 keep-alive connection, one request per REQ, in order;
//	                             REQ is [METHOD][+continue][+early][+big:]CODE, e.g. 200,
//	                             POST+continue:201 (a body sent after "Expect: 100-continue"),
//	                             GET+early:200, GET+big:200 (a 24 KB header),
//	                             PROPFIND:207; prints each final status, then "done N"; with
//	                             -await, dials only once FILE exists (a test creates it when the
//	                             agent tracks the process: its probes are attached)
//	gotls load PORT SECONDS RATE GET /status/200 at RATE requests per second for SECONDS
//	gotls -h2 streams PORT N CODE...
//	                             over one HTTP/2 connection, N rounds of one concurrent request per
//	                             CODE (all in flight at once: the server holds each for 100 ms
//	                             when asked with ?hold=1); prints "done TOTAL", then the median
//	                             and the mean of the client's own durations of the held requests
//	                             in microseconds ("median_us N", "mean_us N")
//	gotls -h2 rate PORT SECONDS [PER_SECOND]
//	                             over one HTTP/2 connection, GETs from 8 goroutines for SECONDS,
//	                             back to back or PER_SECOND in all; prints "done TOTAL" and the
//	                             durations as streams does
//	gotls [-h2] abandon PORT N M a HEAD answered 200, then N GETs the server answers after 3 s
//	                             (?hold=long) and M GETs whose status 201 it sends at once and
//	                             its body after 3 s (&flush=1), all at once; once the M statuses
//	                             are in and 300 ms more, prints "abandoned" and exits 0 with the
//	                             N+M requests open. HTTP/2: one connection; HTTP/1.1: one each
//	gotls -h2 rate PORT SECONDS  GET /status/200 over one HTTP/2 connection, back to back from 8
//	                             goroutines, for SECONDS; prints "done N" and "median_us N"
//	gotls echo N SIZE            N round trips of SIZE bytes over one TLS connection to an
//	                             in-process echo server; prints nanoseconds per round trip
//	                             (each is 2 Writes and 2 Reads through crypto/tls)
//	gotls waitprobe LAUNCH_NS    waits (up to 10 s) until a uprobe's breakpoint appears in the first
//	                             bytes of crypto/tls.(*Conn).Write, then prints nanoseconds since
//	                             LAUNCH_NS (the launcher's clock before exec)
//	gotls h2raw GO_FILE PORT FRAMES [WRITES]
//	                             once GO_FILE exists (a tracer creates it when its probes are
//	                             attached), one Write of the HTTP/2 preface and an empty SETTINGS frame
//	                             followed by FRAMES connection WINDOW_UPDATE frames (increment 1:
//	                             nothing the server answers or limits), then WRITES-1 more Writes
//	                             of FRAMES such frames, to an -h2 server, reading what it sends all
//	                             the while; prints "written", then once GO_FILE.more exists one
//	                             more such Write; reads 1 s more and prints "done"
//	gotls stale GO_FILE PORT N   once GO_FILE exists, N TLS connections that each write a GET,
//	                             read one byte of the answer into a one-byte buffer and are
//	                             closed with no Read pending (HTTP/1.x state no failed Read frees);
//	                             prints "stale N"; once GO_FILE.more exists, N more, "stale 2N";
//	                             then waits until killed
//	gotls calls PORT N [SPIN_MS] N GET /status/200 over one HTTP/1.1 keep-alive connection, each
//	                             written with one (*tls.Conn).Write and read with (*tls.Conn).Read
//	                             calls made here (no bufio, no net/http), with SPIN_MS of CPU
//	                             spent between requests; N 0: until killed. Prints "calls N
//	                             writes W reads R": the crypto/tls calls it made, exactly
//	gotls spin N                 N calls of main.spin (no TLS: a target for measuring the cost of
//	                             a bare uprobe); prints nanoseconds per call
//
// The certificate is generated at start-up (no files, no network). HTTP/2 is switched off so
// every exchange is HTTP/1.1 unless -h2 is given to both sides. A client starts its first request
// right after exec: an agent must count it.
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// variant is set per build (-ldflags=-X main.variant=N) to make binaries a tracer has never seen.
var variant string

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

// request builds the request a client argument describes (see the usage above).
func request(port, arg string) *http.Request {
	method, code := "GET", arg
	expect, early, big := false, false, false
	if i := strings.LastIndexByte(arg, ':'); i >= 0 {
		method, code = arg[:i], arg[i+1:]
		for _, opt := range []string{"+continue", "+early", "+big"} {
			if strings.Contains(method, opt) {
				method = strings.Replace(method, opt, "", 1)
				expect = expect || opt == "+continue"
				early = early || opt == "+early"
				big = big || opt == "+big"
			}
		}
		if method == "" {
			method = "GET"
		}
	}
	var body io.Reader
	if expect {
		body = strings.NewReader(strings.Repeat("x", 4096))
	}
	req, err := http.NewRequest(method, "https://127.0.0.1:"+port+"/status/"+code, body)
	check(err)
	if expect {
		req.Header.Set("Expect", "100-continue")
	}
	if early {
		req.Header.Set("Early", "1")
	}
	if big {
		// 24 KB of random hex: a header block over 16 KiB even after HPACK's Huffman coding.
		b := make([]byte, 12000)
		_, err := rand.Read(b)
		check(err)
		req.Header.Set("Big", fmt.Sprintf("%x", b))
	}
	return req
}

// spin has Go's stack-bound check prologue (it calls spinLeaf), so a probe can sit on its first
// instruction (single-stepped), its `jbe` (emulated) or its `ret` (single-stepped).
//
//go:noinline
func spin(i int) int {
	return spinLeaf(i) + 1
}

//go:noinline
func spinLeaf(i int) int {
	return i * 3
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	h2 := flag.Bool("h2", false, "use HTTP/2")
	logRequests := flag.Bool("log", false, "server: print \"request METHOD STATUS PROTO\" per request")
	await := flag.String("await", "", "client: dial once this file exists")
	var logMu sync.Mutex
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
			if r.Header.Get("Early") == "1" {
				w.Header().Set("Link", "</style.css>; rel=preload; as=style")
				w.WriteHeader(http.StatusEarlyHints)
			}
			// Reading the body is what makes the server answer "100 Continue" first.
			_, err = io.Copy(io.Discard, r.Body)
			check(err)
			flush := r.URL.Query().Get("flush") == "1"
			if flush {
				w.WriteHeader(code)
				w.(http.Flusher).Flush()
			}
			switch r.URL.Query().Get("hold") {
			case "1":
				time.Sleep(100 * time.Millisecond)
			case "long":
				time.Sleep(3 * time.Second)
			}
			if !flush {
				w.WriteHeader(code)
			}
			fmt.Fprintf(w, "status %d\n", code)
			if *logRequests {
				logMu.Lock()
				fmt.Printf("request %s %d %s\n", r.Method, code, r.Proto)
				logMu.Unlock()
			}
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
			// Wait for the server's "100 Continue" before sending a body.
			ExpectContinueTimeout: 10 * time.Second,
		}
		if !*h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		client := &http.Client{Transport: tr}
		if *await != "" {
			awaitFile(*await)
		}
		for _, arg := range args[2:] {
			resp, err := client.Do(request(args[1], arg))
			check(err)
			_, err = io.Copy(io.Discard, resp.Body)
			check(err)
			resp.Body.Close()
			fmt.Println(resp.StatusCode)
		}
		fmt.Printf("done %d\n", len(args)-2)
	case "abandon":
		if len(args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: gotls [-h2] abandon PORT N M")
			os.Exit(2)
		}
		n, err := strconv.Atoi(args[2])
		check(err)
		m, err := strconv.Atoi(args[3])
		check(err)
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
		if *h2 {
			tr.ForceAttemptHTTP2 = true
			tr.MaxConnsPerHost = 1
		} else {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		client := &http.Client{Transport: tr}
		get := func(method, path string) *http.Response {
			req, err := http.NewRequest(method, "https://127.0.0.1:"+args[1]+path, nil)
			check(err)
			resp, err := client.Do(req)
			check(err)
			if (resp.ProtoMajor == 2) != *h2 {
				check(fmt.Errorf("got %s", resp.Proto))
			}
			return resp
		}
		resp := get("HEAD", "/status/200") // the connection first, shared by the rest
		resp.Body.Close()
		for i := 0; i < n; i++ {
			go get("GET", "/status/200?hold=long")
		}
		var wg sync.WaitGroup
		for i := 0; i < m; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); get("GET", "/status/201?hold=long&flush=1") }()
		}
		wg.Wait()
		time.Sleep(300 * time.Millisecond)
		fmt.Println("abandoned")
		os.Exit(0)
	case "streams", "rate":
		if len(args) < 3 || !*h2 {
			fmt.Fprintln(os.Stderr, "usage: gotls -h2 streams PORT N CODE... | gotls -h2 rate PORT SECONDS [PER_SECOND]")
			os.Exit(2)
		}
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
			ForceAttemptHTTP2: true, MaxConnsPerHost: 1}
		client := &http.Client{Transport: tr}
		var mu sync.Mutex
		var durations []time.Duration
		do := func(method, code, query string) {
			req, err := http.NewRequest(method, "https://127.0.0.1:"+args[1]+"/status/"+code+query, nil)
			check(err)
			start := time.Now()
			resp, err := client.Do(req)
			check(err)
			_, err = io.Copy(io.Discard, resp.Body)
			check(err)
			resp.Body.Close()
			d := time.Since(start)
			if resp.ProtoMajor != 2 {
				check(fmt.Errorf("got %s, want HTTP/2", resp.Proto))
			}
			if query != "" || args[0] == "rate" {
				mu.Lock()
				durations = append(durations, d)
				mu.Unlock()
			}
		}
		// The connection first, so that every later request shares it.
		do("HEAD", "200", "")
		n := 1
		if args[0] == "streams" {
			rounds, err := strconv.Atoi(args[2])
			check(err)
			for i := 0; i < rounds; i++ {
				var wg sync.WaitGroup
				for _, arg := range args[3:] {
					method, code := "GET", arg
					if j := strings.LastIndexByte(arg, ':'); j >= 0 {
						method, code = arg[:j], arg[j+1:]
					}
					wg.Add(1)
					go func() { defer wg.Done(); do(method, code, "?hold=1") }()
					n++
				}
				wg.Wait()
			}
		} else {
			seconds, err := strconv.Atoi(args[2])
			check(err)
			// With PER_SECOND, each of the 8 goroutines starts its requests 8/PER_SECOND s apart
			// (catching up after a slow one); without, back to back.
			var every time.Duration
			if len(args) > 3 {
				perSecond, err := strconv.Atoi(args[3])
				check(err)
				every = 8 * time.Second / time.Duration(perSecond)
			}
			begin := time.Now()
			end := begin.Add(time.Duration(seconds) * time.Second)
			var wg sync.WaitGroup
			var count int64
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next := begin; time.Now().Before(end); next = next.Add(every) {
						if wait := time.Until(next); wait > 0 {
							time.Sleep(wait)
						}
						do("GET", "200", "")
						atomic.AddInt64(&count, 1)
					}
				}()
			}
			wg.Wait()
			n += int(count)
		}
		sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
		var sum time.Duration
		for _, d := range durations {
			sum += d
		}
		fmt.Printf("done %d\nmedian_us %d\nmean_us %d\n", n, durations[len(durations)/2].Microseconds(),
			(sum / time.Duration(len(durations))).Microseconds())
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
	case "waitprobe":
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "usage: gotls waitprobe LAUNCH_NS")
			os.Exit(2)
		}
		launch, err := strconv.ParseInt(args[1], 10, 64)
		check(err)
		// The method expression's code pointer is the method itself; its first bytes hold the
		// stack check where the probes go. They are compared with the executable's own bytes:
		// the agent may have attached before this line runs (within a millisecond of the exec).
		code := (*[32]byte)(unsafe.Pointer(reflect.ValueOf((*tls.Conn).Write).Pointer()))
		original, err := fileBytes(uint64(uintptr(unsafe.Pointer(code))), len(code))
		check(err)
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
			if !bytes.Equal(code[:], original) {
				fmt.Println(time.Now().UnixNano() - launch)
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
		fmt.Fprintln(os.Stderr, "no probe within 10 s", variant)
		os.Exit(1)
	case "prefaces":
		// A tenant holding HTTP/2 connections open: N TLS connections (ALPN h2), each sent the
		// client preface and an empty SETTINGS, then held until the process is killed.
		if len(args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: gotls prefaces PORT N")
			os.Exit(2)
		}
		n, err := strconv.Atoi(args[2])
		check(err)
		conns := make([]*tls.Conn, 0, n)
		for i := 0; i < n; i++ {
			c, err := tls.Dial("tcp", "127.0.0.1:"+args[1],
				&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
			check(err)
			first := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
			_, err = c.Write(append(first, 0, 0, 0, 4, 0, 0, 0, 0, 0))
			check(err)
			conns = append(conns, c)
		}
		fmt.Printf("opened %d\n", len(conns))
		select {}
	case "h2raw":
		if len(args) < 4 || len(args) > 6 {
			fmt.Fprintln(os.Stderr, "usage: gotls h2raw GO_FILE PORT FRAMES [WRITES [PAUSE_MS]]")
			os.Exit(2)
		}
		count, err := strconv.Atoi(args[3])
		check(err)
		writes := 1
		if len(args) >= 5 {
			writes, err = strconv.Atoi(args[4])
			check(err)
		}
		pause := 0
		if len(args) == 6 {
			pause, err = strconv.Atoi(args[5])
			check(err)
		}
		awaitFile(args[1])
		c, err := tls.Dial("tcp", "127.0.0.1:"+args[2],
			&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		check(err)
		read := make(chan struct{})
		go func() { // the server's SETTINGS and its ACK, until the deadline
			_, _ = io.Copy(io.Discard, c)
			close(read)
		}()
		var frames []byte
		update := []byte{0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 1}
		for i := 0; i < count; i++ {
			frames = append(frames, update...)
		}
		first := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
		first = append(first, 0, 0, 0, 4, 0, 0, 0, 0, 0) // SETTINGS, no parameters
		_, err = c.Write(append(first, frames...))
		check(err)
		for i := 1; i < writes; i++ {
			time.Sleep(time.Duration(pause) * time.Millisecond)
			_, err = c.Write(frames)
			check(err)
		}
		fmt.Println("written")
		awaitFile(args[1] + ".more")
		_, err = c.Write(frames)
		check(err)
		check(c.SetReadDeadline(time.Now().Add(time.Second)))
		<-read
		c.Close()
		fmt.Println("done")
	case "stale":
		if len(args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: gotls stale GO_FILE PORT N")
			os.Exit(2)
		}
		n, err := strconv.Atoi(args[3])
		check(err)
		round := func() {
			for i := 0; i < n; i++ {
				c, err := tls.Dial("tcp", "127.0.0.1:"+args[2], &tls.Config{InsecureSkipVerify: true})
				check(err)
				_, err = c.Write([]byte("GET /status/200 HTTP/1.1\r\nHost: stale\r\n\r\n"))
				check(err)
				one := make([]byte, 1)
				_, err = io.ReadFull(c, one)
				check(err)
				check(c.Close())
			}
		}
		awaitFile(args[1])
		round()
		fmt.Printf("stale %d\n", n)
		awaitFile(args[1] + ".more")
		round()
		fmt.Printf("stale %d\n", 2*n)
		time.Sleep(time.Hour)
	case "calls":
		if len(args) != 3 && len(args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: gotls calls PORT N [SPIN_MS]")
			os.Exit(2)
		}
		n, err := strconv.Atoi(args[2])
		check(err)
		spinFor := time.Duration(0)
		if len(args) == 4 {
			ms, err := strconv.Atoi(args[3])
			check(err)
			spinFor = time.Duration(ms) * time.Millisecond
		}
		c, err := tls.Dial("tcp", "127.0.0.1:"+args[1], &tls.Config{InsecureSkipVerify: true})
		check(err)
		writes, reads := 0, 0
		buf := make([]byte, 4096)
		request := []byte("GET /status/200 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		sum := 0
		for i := 0; n <= 0 || i < n; i++ {
			_, err := c.Write(request)
			check(err)
			writes++
			// One response: its head, then Content-Length bytes of body.
			var got []byte
			for {
				m, err := c.Read(buf)
				reads++
				check(err)
				got = append(got, buf[:m]...)
				head := bytes.Index(got, []byte("\r\n\r\n"))
				if head < 0 {
					continue
				}
				length := 0
				for _, line := range strings.Split(string(got[:head]), "\r\n") {
					if l := strings.ToLower(line); strings.HasPrefix(l, "content-length: ") {
						length, err = strconv.Atoi(strings.TrimPrefix(l, "content-length: "))
						check(err)
					}
				}
				if len(got) >= head+4+length {
					break
				}
			}
			for end := time.Now().Add(spinFor); time.Now().Before(end); {
				sum += spin(sum)
			}
		}
		if sum == 42 { // keeps the loop
			fmt.Fprintln(os.Stderr, sum)
		}
		fmt.Printf("calls %d writes %d reads %d\n", n, writes, reads)
	case "spin":
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "usage: gotls spin N")
			os.Exit(2)
		}
		n, err := strconv.Atoi(args[1])
		check(err)
		sum := 0
		start := time.Now()
		for i := 0; i < n; i++ {
			sum += spin(i)
		}
		elapsed := time.Since(start).Nanoseconds()
		if sum == 42 { // keeps the loop; never true for n > 1
			fmt.Fprintln(os.Stderr, sum)
		}
		fmt.Println(elapsed / int64(n))
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", args[0])
		os.Exit(2)
	}
}

// fileBytes reads n bytes at virtual address addr from this program's executable on disk (a
// non-PIE Go binary: addresses are the ELF's own).
// awaitFile returns once path exists; after 10 s it exits the program with status 1.
func awaitFile(path string) {
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(end) {
			fmt.Fprintln(os.Stderr, "no", path, "within 10 s")
			os.Exit(1)
		}
	}
}

func fileBytes(addr uint64, n int) ([]byte, error) {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr+uint64(n) <= p.Vaddr+p.Filesz {
			b := make([]byte, n)
			_, err := p.ReadAt(b, int64(addr-p.Vaddr))
			return b, err
		}
	}
	return nil, fmt.Errorf("address %#x is in no loaded segment", addr)
}
