package authsrv

import (
	"context"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/monitoring"
)

// rightClientType is the admin right to list the client applications.
const rightClientType = "clienttype"

// ClientApps lists the client applications that called /validate/check,
// by client type (the User-Agent), each with the newest last seen over
// all nodes (right clienttype; administrators only). The clients this
// node saw since its last write to the store are included.
func (o *Ops) ClientApps(ctx context.Context, who caller.Caller) (map[string][]monitoring.ClientApp, error) {
	var out map[string][]monitoring.ClientApp
	err := o.readConfig(ctx, who, "get_clients", "GET /client/", rightClientType, Target{},
		func(ctx context.Context, r *opRun) error {
			var err error
			out, err = o.s.clients.List(ctx)
			return err
		})
	return out, err
}
