package authsrv

import (
	"context"
	"strconv"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/notify"
)

// SetSMTPServer creates or replaces the SMTP server d.Identifier (right
// smtpserver_write, event set_smtpserver).
func (o *Ops) SetSMTPServer(ctx context.Context, who caller.Caller, d notify.SMTPServer) error {
	return o.run(ctx, who, opSpec{event: "set_smtpserver", action: "POST /smtpserver/" + d.Identifier, right: rightSMTPWrite},
		func(ctx context.Context, r *opRun) error {
			return o.s.notify.SetSMTP(ctx, d, r.Audit)
		})
}

// DeleteSMTPServer removes the SMTP server id (right smtpserver_write,
// event delete_smtpserver).
func (o *Ops) DeleteSMTPServer(ctx context.Context, who caller.Caller, id string) error {
	return o.run(ctx, who, opSpec{event: "delete_smtpserver", action: "DELETE /smtpserver/" + id, right: rightSMTPWrite},
		func(ctx context.Context, r *opRun) error {
			return o.s.notify.DeleteSMTP(ctx, id, r.Audit)
		})
}

// SetSMSGateway creates or replaces the SMS gateway g.Name (right
// smsgateway_write, event set_smsgateway) and returns its id.
func (o *Ops) SetSMSGateway(ctx context.Context, who caller.Caller, g notify.Gateway) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "set_smsgateway", action: "POST /smsgateway", right: rightSMSWrite},
		func(ctx context.Context, r *opRun) error {
			var err error
			id, err = o.s.notify.SetGateway(ctx, g, r.Audit)
			return err
		})
	return id, err
}

// DeleteSMSGateway removes the SMS gateway name (right smsgateway_write,
// event delete_smsgateway) and returns its id.
func (o *Ops) DeleteSMSGateway(ctx context.Context, who caller.Caller, name string) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "delete_smsgateway", action: "DELETE /smsgateway/" + name, right: rightSMSWrite},
		func(ctx context.Context, r *opRun) error {
			var err error
			id, err = o.s.notify.DeleteGateway(ctx, name, r.Audit)
			return err
		})
	return id, err
}

// DeleteSMSGatewayOption removes one option (or "header.<name>") of the
// gateway with id gwid (right smsgateway_write, event
// delete_smsgateway_option) and returns gwid.
func (o *Ops) DeleteSMSGatewayOption(ctx context.Context, who caller.Caller, gwid int, key string) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "delete_smsgateway_option", action: "DELETE /smsgateway/option/" + strconv.Itoa(gwid) + "/" + key, right: rightSMSWrite},
		func(ctx context.Context, r *opRun) error {
			var err error
			id, err = o.s.notify.DeleteGatewayOption(ctx, gwid, key, r.Audit)
			return err
		})
	return id, err
}

// SetRadiusServer creates or replaces the RADIUS server d.Identifier
// (right radiusserver_write, event set_radiusserver).
func (o *Ops) SetRadiusServer(ctx context.Context, who caller.Caller, d notify.RadiusServer) error {
	return o.run(ctx, who, opSpec{event: "set_radiusserver", action: "POST /radiusserver/" + d.Identifier, right: rightRadiusWrite},
		func(ctx context.Context, r *opRun) error {
			return o.s.notify.SetRadius(ctx, d, r.Audit)
		})
}

// DeleteRadiusServer removes the RADIUS server id (right
// radiusserver_write, event delete_radiusserver).
func (o *Ops) DeleteRadiusServer(ctx context.Context, who caller.Caller, id string) error {
	return o.run(ctx, who, opSpec{event: "delete_radiusserver", action: "DELETE /radiusserver/" + id, right: rightRadiusWrite},
		func(ctx context.Context, r *opRun) error {
			return o.s.notify.DeleteRadius(ctx, id, r.Audit)
		})
}
