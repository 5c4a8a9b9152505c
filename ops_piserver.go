package authsrv

import (
	"context"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/notify"
)

// Rights of the remote privacyIDEA server definitions (admin scope).
const (
	rightPIServerRead  = "privacyideaserver_read"
	rightPIServerWrite = "privacyideaserver_write"
)

// SetPIServer creates or replaces the remote privacyIDEA server
// d.Identifier (right privacyideaserver_write, event
// set_privacyideaserver).
func (o *Ops) SetPIServer(ctx context.Context, who caller.Caller, d notify.PIServer) error {
	return o.run(ctx, who, opSpec{event: "set_privacyideaserver", action: "POST /privacyideaserver/" + d.Identifier, right: rightPIServerWrite},
		func(ctx context.Context, r *opRun) error {
			return o.s.notify.SetPIServer(ctx, d, r.Audit)
		})
}

// DeletePIServer removes the remote privacyIDEA server id (right
// privacyideaserver_write, event delete_privacyideaserver).
func (o *Ops) DeletePIServer(ctx context.Context, who caller.Caller, id string) error {
	return o.run(ctx, who, opSpec{event: "delete_privacyideaserver", action: "DELETE /privacyideaserver/" + id, right: rightPIServerWrite},
		func(ctx context.Context, r *opRun) error {
			return o.s.notify.DeletePIServer(ctx, id, r.Audit)
		})
}

// PIServers lists the remote privacyIDEA servers (right
// privacyideaserver_read, event get_privacyideaservers).
func (o *Ops) PIServers(ctx context.Context, who caller.Caller) ([]notify.PIServer, error) {
	var out []notify.PIServer
	err := o.readConfig(ctx, who, "get_privacyideaservers", "GET /privacyideaserver/", rightPIServerRead, Target{}, func(ctx context.Context, r *opRun) error {
		var err error
		out, err = o.s.notify.PIServers(ctx)
		return err
	})
	return out, err
}

// TestPIServer sends a test /validate/check for user to the URL of the
// inline definition d (right privacyideaserver_write, event
// test_privacyideaserver); it reports whether the remote server accepted
// it. No answer is an error.
func (o *Ops) TestPIServer(ctx context.Context, who caller.Caller, d notify.PIServer, user, password string) (bool, error) {
	ok := false
	err := o.readConfig(ctx, who, "test_privacyideaserver", "POST /privacyideaserver/test_request", rightPIServerWrite, Target{}, func(ctx context.Context, r *opRun) error {
		for _, f := range []struct{ name, v string }{{"identifier", d.Identifier}, {"url", d.URL}, {"username", user}, {"password", password}} {
			if f.v == "" {
				return apierr.MissingParameter(f.name)
			}
		}
		var err error
		ok, err = o.s.notify.TestPIServer(ctx, d, user, password)
		return err
	})
	return ok, err
}
