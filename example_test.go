package authsrv_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/server"
)

// Example embeds authsrv in a Go program: build a Server on a data
// directory, run its background work, mount the HTTP API and manage it
// directly through the library.
func Example() {
	dir, _ := os.MkdirTemp("", "authsrv-example")
	defer func() { _ = os.RemoveAll(dir) }()

	s, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithNodeName("node1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = s.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx) }()

	// Manage without HTTP.
	if err := s.Admins().Add(ctx, "ops", "correct horse battery staple"); err != nil {
		fmt.Println(err)
		return
	}
	ok, _ := s.Admins().Check(ctx, "ops", "correct horse battery staple")
	fmt.Println("library login:", ok)

	// Serve the privacyIDEA-compatible API.
	srv := httptest.NewServer(server.New(s))
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/auth", "application/x-www-form-urlencoded",
		strings.NewReader("username=ops&password=correct+horse+battery+staple"))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = resp.Body.Close()
	fmt.Println("HTTP login:", resp.Status)
	// Output:
	// library login: true
	// HTTP login: 200 OK
}
