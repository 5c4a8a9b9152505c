package authsrv

import (
	"context"
	"maps"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caconnector"
	"github.com/authsrv/authsrv/caller"
)

// Rights of the CA connectors (admin scope).
const (
	rightCAConnectorRead   = "caconnectorread"
	rightCAConnectorWrite  = "caconnectorwrite"
	rightCAConnectorDelete = "caconnectordelete"
)

// SetCAConnector creates the CA connector name or changes its
// configuration (right caconnectorwrite) and returns its id. typ is the
// connector type ("local"); params are its configuration keys (only
// those given change). The local CA it describes must load (key and
// certificate readable and matching, templates valid, CRL writable), or
// nothing is stored.
func (o *Ops) SetCAConnector(ctx context.Context, who caller.Caller, name, typ string, params map[string]string) (int, error) {
	var id int
	err := o.adminOnlyOp(ctx, who, "save_caconnector", "POST /caconnector/"+name, rightCAConnectorWrite,
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text("name: "+name, 512)
			var err error
			id, err = o.s.caconnectors.Set(ctx, name, typ, maps.Clone(params), r.Audit)
			return err
		})
	return id, err
}

// CAConnectors lists the CA connectors, or only the one named name when
// it is not "" (none when unknown) (right caconnectorread).
func (o *Ops) CAConnectors(ctx context.Context, who caller.Caller, name string) ([]caconnector.Def, error) {
	var out []caconnector.Def
	err := o.readConfig(ctx, who, "get_caconnector", "GET /caconnector/"+name, rightCAConnectorRead, Target{},
		func(ctx context.Context, r *opRun) error {
			var err error
			out, err = o.s.caconnectors.List(ctx, name)
			return err
		})
	return out, err
}

// CAConnectorSpecific returns the type-specific options of a connector
// of type typ configured with params so far (right caconnectorread).
func (o *Ops) CAConnectorSpecific(ctx context.Context, who caller.Caller, typ string, params map[string]string) (map[string]any, error) {
	var out map[string]any
	err := o.readConfig(ctx, who, "get_caconnector_specific", "GET /caconnector/specific/"+typ, rightCAConnectorRead, Target{},
		func(ctx context.Context, r *opRun) error {
			var err error
			out, err = o.s.caconnectors.SpecificOptions(typ, params)
			return err
		})
	return out, err
}

// DeleteCAConnector removes the CA connector name and returns its id
// (right caconnectordelete); caconnector.ErrNotFound when unknown.
func (o *Ops) DeleteCAConnector(ctx context.Context, who caller.Caller, name string) (int, error) {
	var id int
	err := o.adminOnlyOp(ctx, who, "delete_caconnector", "DELETE /caconnector/"+name, rightCAConnectorDelete,
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text("name: "+name, 512)
			var err error
			id, err = o.s.caconnectors.Delete(ctx, name, r.Audit)
			return err
		})
	return id, err
}

// CAConnectorsForEnrollment lists the CA connectors without their
// configuration (names, types and templates), for whoever may enroll
// certificate tokens: privacyIDEA's GET /system/names/caconnector (right
// enrollCERTIFICATE, administrators and users).
func (o *Ops) CAConnectorsForEnrollment(ctx context.Context, who caller.Caller) ([]caconnector.Def, error) {
	var out []caconnector.Def
	err := o.run(ctx, who, opSpec{event: "list_ca_connectors", action: "GET /system/names/caconnector", right: "enrollCERTIFICATE"},
		func(ctx context.Context, r *opRun) error {
			list, err := o.s.caconnectors.List(ctx, "")
			if err != nil {
				return err
			}
			for i := range list {
				list[i].Data = map[string]string{}
			}
			out = list
			return nil
		})
	return out, err
}
