// Command webhook_load is webhook_bench's low-cost load generator: closed-loop clients, each on its
// own TLS keep-alive connection (as the API server keeps them), sending the next AdmissionReview as
// soon as the last answer arrived. It uses only Go's standard library, so the bench builds it
// offline. HTTP/1.1 is written and read by hand (one POST, a Content-Length answer) to keep the
// client's own CPU per request small: on a 2-core machine the client competes with the server, and
// the figure the bench wants is the server's latency.
//
// It warms up, prints "measuring" on stdout, measures, prints "done", then one JSON object:
// requests, seconds, p50_ms, p99_ms and the client's own CPU seconds over the measuring window.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type bodies []string

func (b *bodies) String() string     { return strings.Join(*b, ",") }
func (b *bodies) Set(v string) error { *b = append(*b, v); return nil }

type result struct {
	Requests   int     `json:"requests"`
	Seconds    float64 `json:"seconds"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

func request(path, host string, body []byte, closeConn bool) []byte {
	connection := "keep-alive"
	if closeConn {
		connection = "close"
	}
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nConnection: %s\r\nContent-Length: %d\r\n\r\n",
		path, host, connection, len(body))
	return append([]byte(head), body...)
}

// exchange writes one request and reads its answer, which must be a 200 with a Content-Length.
func exchange(conn net.Conn, r *bufio.Reader, req []byte, scratch []byte) ([]byte, error) {
	if _, err := conn.Write(req); err != nil {
		return scratch, err
	}
	status, err := r.ReadSlice('\n')
	if err != nil {
		return scratch, err
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200")) {
		return scratch, fmt.Errorf("unexpected answer: %q", strings.TrimSpace(string(status)))
	}
	length := -1
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return scratch, err
		}
		if len(line) <= 2 {
			break
		}
		if colon := bytes.IndexByte(line, ':'); colon > 0 && strings.EqualFold(string(line[:colon]), "content-length") {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(line[colon+1:]))); err != nil {
				return scratch, err
			}
		}
	}
	if length < 0 {
		return scratch, errors.New("answer without Content-Length")
	}
	if cap(scratch) < length {
		scratch = make([]byte, length)
	}
	_, err = io.ReadFull(r, scratch[:length])
	return scratch, err
}

func dial(addr string, config *tls.Config) (net.Conn, *bufio.Reader, error) {
	var conn net.Conn
	var err error
	if config == nil {
		conn, err = net.Dial("tcp", addr)
	} else {
		conn, err = tls.Dial("tcp", addr, config)
	}
	if err != nil {
		return nil, nil, err
	}
	return conn, bufio.NewReaderSize(conn, 16384), nil
}

// client runs until stop, recording each latency when record is set (read after warm-up ends).
func client(addr string, config *tls.Config, reqs [][]byte, fresh bool, stop <-chan struct{}, record *atomic.Bool, mu *sync.Mutex, out *[]time.Duration, errs chan<- error) {
	var own []time.Duration
	defer func() { mu.Lock(); *out = append(*out, own...); mu.Unlock() }()
	var conn net.Conn
	var r *bufio.Reader
	var err error
	var scratch []byte
	for i := 0; ; i++ {
		select {
		case <-stop:
			if conn != nil {
				conn.Close()
			}
			return
		default:
		}
		started := time.Now()
		if conn == nil {
			if conn, r, err = dial(addr, config); err != nil {
				errs <- err
				return
			}
		}
		if scratch, err = exchange(conn, r, reqs[i%len(reqs)], scratch); err != nil {
			errs <- err
			return
		}
		if fresh {
			conn.Close()
			conn = nil
		}
		elapsed := time.Since(started)
		if record.Load() {
			own = append(own, elapsed)
		}
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// quantile as Python's statistics.quantiles(data, n=100) (its default, exclusive method) gives cut i.
func quantile(sorted []time.Duration, i int) float64 {
	n := len(sorted)
	m := n + 1
	j := i * m / 100
	delta := i*m - j*100
	if j < 1 {
		return float64(sorted[0])
	}
	if j >= n {
		return float64(sorted[n-1])
	}
	return (float64(sorted[j-1])*float64(100-delta) + float64(sorted[j])*float64(delta)) / 100
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8443", "host:port of the webhook")
	path := flag.String("path", "/validate", "the path to POST to")
	caFile := flag.String("ca", "", "PEM file of the CA that signed the serving certificate (none: plain HTTP)")
	clients := flag.Int("clients", 16, "concurrent closed-loop clients")
	seconds := flag.Float64("seconds", 5, "measuring time")
	warmup := flag.Float64("warmup", 0.5, "warm-up time before measuring")
	fresh := flag.Bool("fresh", false, "a new TLS connection per request instead of keep-alive")
	var files bodies
	flag.Var(&files, "body", "a file with one request body; repeat to alternate bodies")
	flag.Parse()
	if len(files) == 0 {
		fmt.Fprintln(os.Stderr, "webhook_load: at least one -body is required")
		os.Exit(2)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhook_load:", err)
		os.Exit(2)
	}
	var config *tls.Config
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "webhook_load:", err)
			os.Exit(2)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fmt.Fprintf(os.Stderr, "webhook_load: %s holds no PEM certificate\n", *caFile)
			os.Exit(2)
		}
		// TLS 1.3, and a full handshake for every new connection (no session resumption), as the
		// bench's Python client makes them
		config = &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS13}
	}
	var reqs [][]byte
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "webhook_load:", err)
			os.Exit(2)
		}
		reqs = append(reqs, request(*path, host, body, *fresh))
	}

	stop := make(chan struct{})
	errs := make(chan error, *clients)
	var mu sync.Mutex
	var record atomic.Bool
	var latencies []time.Duration
	var wg sync.WaitGroup
	for c := 0; c < *clients; c++ {
		wg.Add(1)
		// each client starts on another body, so the mix stays even at any instant
		rotated := append(append([][]byte{}, reqs[c%len(reqs):]...), reqs[:c%len(reqs)]...)
		go func() { defer wg.Done(); client(*addr, config, rotated, *fresh, stop, &record, &mu, &latencies, errs) }()
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "webhook_load:", err)
		os.Exit(1)
	}
	select {
	case err := <-errs:
		fail(err)
	case <-time.After(time.Duration(*warmup * float64(time.Second))):
	}
	fmt.Println("measuring")
	cpu0, t0 := cpuSeconds(), time.Now()
	record.Store(true)
	select {
	case err := <-errs:
		fail(err)
	case <-time.After(time.Duration(*seconds * float64(time.Second))):
	}
	record.Store(false)
	elapsed, cpu := time.Since(t0).Seconds(), cpuSeconds()-cpu0
	fmt.Println("done")
	close(stop)
	wg.Wait()
	if len(latencies) < 2 {
		fail(errors.New("fewer than two answers in the measuring time"))
	}
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	out, _ := json.Marshal(result{
		Requests:   len(latencies),
		Seconds:    elapsed,
		P50Ms:      quantile(latencies, 50) / 1e6,
		P99Ms:      quantile(latencies, 99) / 1e6,
		CPUSeconds: cpu,
	})
	fmt.Println(string(out))
}
