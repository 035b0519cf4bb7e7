// gogrpc: a real grpc-go server and client over TLS (Debian's golang-google-grpc-dev, built in
// GOPATH mode), for sonde's Go TLS HTTP/2 tests. The service is gRPC's own health service
// (grpc.health.v1.Health, generated code shipped with grpc-go), answered by this program.
//
//	gogrpc server                 serve on 127.0.0.1 (a free port, printed as "listening PORT");
//	                              Check("code/N") fails with gRPC code N (0: OK, SERVING);
//	                              Watch("stream/K/N") sends K messages, then ends with code N;
//	                              Watch("forever") sends until the client cancels
//	gogrpc client PORT CALL...    one connection; CALL is check:N (a unary call that gets code
//	                              N) or watch:K:N (a server-streaming call: K messages, then
//	                              code N) or cancel:K (a streaming call the client cancels after
//	                              K messages: RST_STREAM); prints each call's code name, then
//	                              "done N"
//	gogrpc client PORT -parallel M check:N
//	                              M unary calls at once on one connection; prints "done M"
//
// The certificate is generated at start-up (no files, no network).
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

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

type health struct {
	healthpb.UnimplementedHealthServer
}

// code parses the number after the last '/' of a service name.
func code(service string) codes.Code {
	n, err := strconv.Atoi(service[strings.LastIndexByte(service, '/')+1:])
	if err != nil || n < 0 || n > 16 {
		return codes.InvalidArgument
	}
	return codes.Code(n)
}

func (health) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if c := code(req.Service); c != codes.OK {
		return nil, status.Error(c, "asked for "+c.String())
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (health) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	if req.Service == "forever" { // until the client cancels
		for {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
				return err
			}
			select {
			case <-stream.Context().Done():
				return stream.Context().Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	parts := strings.Split(req.Service, "/") // stream/K/N
	if len(parts) != 3 {
		return status.Error(codes.InvalidArgument, "want stream/K/N")
	}
	k, err := strconv.Atoi(parts[1])
	if err != nil {
		return status.Error(codes.InvalidArgument, "bad K")
	}
	for i := 0; i < k; i++ {
		if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
			return err
		}
	}
	if c := code(req.Service); c != codes.OK {
		return status.Error(c, "asked for "+c.String())
	}
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gogrpc server | gogrpc client PORT CALL...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "server":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		check(err)
		creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{certificate()}})
		s := grpc.NewServer(grpc.Creds(creds))
		healthpb.RegisterHealthServer(s, health{})
		fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)
		check(s.Serve(ln))
	case "client":
		if len(os.Args) < 4 {
			fmt.Fprintln(os.Stderr, "usage: gogrpc client PORT CALL...")
			os.Exit(2)
		}
		creds := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})
		conn, err := grpc.Dial("127.0.0.1:"+os.Args[2], grpc.WithTransportCredentials(creds), grpc.WithBlock())
		check(err)
		defer conn.Close()
		// Before Close (deferred above) and exit: a cancelled call returns before its RST_STREAM
		// is written (grpc-go queues it), and Close drops what is queued; and an agent attributes
		// a process to its container some milliseconds after its exec (a process gone before
		// that is discarded, issue 21). Neither is what these tests are about.
		defer time.Sleep(300 * time.Millisecond)
		client := healthpb.NewHealthClient(conn)
		ctx := context.Background()
		unary := func(n string) codes.Code {
			_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "code/" + n})
			return status.Code(err)
		}
		args := os.Args[3:]
		if args[0] == "-parallel" {
			m, err := strconv.Atoi(args[1])
			check(err)
			n := strings.TrimPrefix(args[2], "check:")
			var wg sync.WaitGroup
			for i := 0; i < m; i++ {
				wg.Add(1)
				go func() { defer wg.Done(); unary(n) }()
			}
			wg.Wait()
			fmt.Printf("done %d\n", m)
			return
		}
		for _, call := range args {
			f := strings.Split(call, ":")
			switch {
			case f[0] == "check" && len(f) == 2:
				fmt.Println(unary(f[1]))
			case f[0] == "watch" && len(f) == 3:
				stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "stream/" + f[1] + "/" + f[2]})
				check(err)
				got := 0
				for {
					_, err = stream.Recv()
					if err != nil {
						break
					}
					got++
				}
				if err == io.EOF {
					err = nil
				}
				fmt.Printf("%s %d\n", status.Code(err), got)
			case f[0] == "cancel" && len(f) == 2:
				k, err := strconv.Atoi(f[1])
				check(err)
				cctx, cancel := context.WithCancel(ctx)
				stream, err := client.Watch(cctx, &healthpb.HealthCheckRequest{Service: "forever"})
				check(err)
				for i := 0; i < k; i++ {
					_, err = stream.Recv()
					check(err)
				}
				cancel()
				for err == nil {
					_, err = stream.Recv()
				}
				fmt.Printf("%s %d\n", status.Code(err), k)
			default:
				check(fmt.Errorf("bad call %q", call))
			}
		}
		fmt.Printf("done %d\n", len(args))
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}
