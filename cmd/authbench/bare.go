package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// The "bare" subcommand serves the yardstick of "authbench ratio": a plain
// Go net/http handler that parses the form of POST /validate/check and
// writes a privacyIDEA-shaped JSON answer of about 300 bytes, without
// users, tokens, store or audit. What authsrv reaches against it on the
// same machine, with the same load tool, is the share of the machine the
// authentication itself costs.

const bareUsage = `usage: authbench bare [-listen ADDR]

Serves POST /validate/check (and GET /healthz/livez) on a loopback
address: parses the form (user, realm, pass) and answers result.value true
with a JSON answer of about 300 bytes, as a bare Go net/http handler does.
It prints "serving on http://ADDR " when it listens and stops on SIGINT or
SIGTERM.

flags:
`

// bareAnswerDetail and bareAnswer are the shape of the bare handler's
// answer: privacyIDEA's envelope of an accepted /validate/check.
type bareAnswerDetail struct {
	Message  string `json:"message"`
	Serial   string `json:"serial"`
	ThreadID int64  `json:"threadid"`
	Type     string `json:"type"`
}

type bareResult struct {
	Authentication string `json:"authentication"`
	Status         bool   `json:"status"`
	Value          bool   `json:"value"`
}

type bareAnswer struct {
	Detail    bareAnswerDetail `json:"detail"`
	ID        int              `json:"id"`
	JSONRPC   string           `json:"jsonrpc"`
	Result    bareResult       `json:"result"`
	Signature string           `json:"signature"`
	Time      float64          `json:"time"`
	Version   string           `json:"version"`
}

// bareHandler is the bare handler: a form parse, two checks and one JSON
// encoding per request, as small as a real handler gets.
func bareHandler() http.Handler {
	var seq atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /validate/check", func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, `{"result":{"status":false,"error":{"code":905,"message":"bad form"}}}`, http.StatusBadRequest)
			return
		}
		user, realm, pass := r.PostForm.Get("user"), r.PostForm.Get("realm"), r.PostForm.Get("pass")
		if user == "" || realm == "" || pass == "" {
			http.Error(w, `{"result":{"status":false,"error":{"code":905,"message":"missing parameter"}}}`, http.StatusBadRequest)
			return
		}
		a := bareAnswer{
			Detail: bareAnswerDetail{Message: "matching 1 tokens", Serial: "HOTP" + strings.ToUpper(user),
				ThreadID: seq.Add(1), Type: "hotp"},
			ID: 1, JSONRPC: "2.0",
			Result:    bareResult{Authentication: "ACCEPT", Status: true, Value: true},
			Signature: "rsa_sha256_pss:" + strings.Repeat("0", 48),
			Time:      float64(time.Now().UnixNano()) / 1e9,
			Version:   "privacyIDEA 3.10",
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	})
	mux.HandleFunc("GET /healthz/livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	return mux
}

// runBare is "authbench bare": it serves bareHandler until ctx ends.
func runBare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("authbench bare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, bareUsage)
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "authbench bare: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil || !isLoopbackHost(host) {
		fmt.Fprintf(stderr, "authbench bare: -listen %q: want a loopback host:port\n", *listen)
		return exitUsage
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "authbench bare: %v\n", err)
		return exitFailed
	}
	srv := &http.Server{Handler: bareHandler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "authbench bare: serving on http://%s (POST /validate/check)\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "authbench bare: %v\n", err)
		return exitFailed
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return exitOK
}
