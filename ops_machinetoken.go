package authsrv

import (
	"context"
	"strconv"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/machine"
)

// Rights of the machine tokens (admin scope).
const (
	rightMachineTokens = "manage_machine_tokens"
	rightAuthItems     = "fetch_authentication_items"
)

// Event names of the machine token operations. privacyIDEA fires no
// events for its machine endpoints, so no event handler definition names
// them; the Go event handlers see them.
const (
	eventMachineTokenAttach  = "machine_token_attach"
	eventMachineTokenDetach  = "machine_token_detach"
	eventMachineTokenOption  = "machine_token_option"
	eventMachineTokenList    = "machine_token_list"
	eventMachineAuthItems    = "machine_authitem"
	eventMachineApplications = "machine_applications"
)

func machineTokenInfo(serial, application string) string {
	return audit.Text("serial: "+serial+", application: "+application, 512)
}

// machineTokenOp runs a change of the machine tokens of token serial:
// administrators only, right manage_machine_tokens judged against the
// token's owner or realms as the token operations judge it (a realm
// administrator manages the machine tokens of the tokens of the realm),
// or, when no such token is named, against no target.
func (o *Ops) machineTokenOp(ctx context.Context, who caller.Caller, event, action, serial string, fn func(ctx context.Context, r *opRun) error) error {
	check := func(ctx context.Context, r *opRun) error {
		if !who.IsAdmin() {
			return errAdminOnly
		}
		if serial != "" {
			if t, err := o.s.tokens.Get(ctx, serial); err == nil {
				return o.mustAllow(ctx, who, r, rightMachineTokens, t)
			}
		}
		names, err := o.Authorize(ctx, who, adminRight(who, rightMachineTokens), Target{})
		r.note(names...)
		return err
	}
	return o.run(ctx, who, opSpec{event: event, action: action, check: check}, fn)
}

// AttachMachineToken attaches a token to a machine, or to no machine (a
// binding its service_id option selects), for an application (right
// manage_machine_tokens) and returns the machine token's id.
func (o *Ops) AttachMachineToken(ctx context.Context, who caller.Caller, req machine.AttachRequest) (int, error) {
	var id int
	err := o.machineTokenOp(ctx, who, eventMachineTokenAttach, "POST /machine/token", req.Serial,
		func(ctx context.Context, r *opRun) error {
			r.Entry.Serial, r.Entry.Info = audit.Text(req.Serial, 64), machineTokenInfo(req.Serial, req.Application)
			var err error
			id, err = o.s.machineTokens.Attach(ctx, req, r.Audit)
			return err
		})
	return id, err
}

// DetachMachineTokens removes the machine tokens req selects (right
// manage_machine_tokens) and returns how many it removed.
func (o *Ops) DetachMachineTokens(ctx context.Context, who caller.Caller, req machine.DetachRequest) (int, error) {
	var n int
	err := o.machineTokenOp(ctx, who, eventMachineTokenDetach, "DELETE /machine/token/"+req.Serial, req.Serial,
		func(ctx context.Context, r *opRun) error {
			r.Entry.Serial, r.Entry.Info = audit.Text(req.Serial, 64), machineTokenInfo(req.Serial, req.Application)
			var err error
			n, err = o.s.machineTokens.Detach(ctx, req, r.Audit)
			return err
		})
	return n, err
}

// SetMachineTokenOptions sets and deletes options of the machine tokens
// req selects (right manage_machine_tokens) and returns the numbers of
// options asked to be set and deleted.
func (o *Ops) SetMachineTokenOptions(ctx context.Context, who caller.Caller, req machine.OptionRequest) (added, deleted int, err error) {
	err = o.machineTokenOp(ctx, who, eventMachineTokenOption, "POST /machine/tokenoption", req.Serial,
		func(ctx context.Context, r *opRun) error {
			r.Entry.Serial, r.Entry.Info = audit.Text(req.Serial, 64), machineTokenInfo(req.Serial, req.Application)
			if req.ID != 0 {
				r.Entry.Info = "machine token " + strconv.Itoa(req.ID)
			}
			var err error
			added, deleted, err = o.s.machineTokens.SetOptions(ctx, req, r.Audit)
			return err
		})
	return added, deleted, err
}

// MachinesOfToken lists the machine tokens of the token serial (right
// manage_machine_tokens).
func (o *Ops) MachinesOfToken(ctx context.Context, who caller.Caller, serial string) ([]machine.TokenMachine, error) {
	var out []machine.TokenMachine
	err := o.readConfig(ctx, who, eventMachineTokenList, "GET /machine/token", rightMachineTokens, Target{},
		func(ctx context.Context, r *opRun) error {
			r.Entry.Serial, r.Entry.Info = audit.Text(serial, 64), audit.Text("serial: "+serial, 512)
			var err error
			out, err = o.s.machineTokens.OfToken(ctx, serial)
			return err
		})
	return out, err
}

// MachineTokens lists the machine tokens q selects (right
// manage_machine_tokens).
func (o *Ops) MachineTokens(ctx context.Context, who caller.Caller, q machine.Query) (machine.ListResult, error) {
	var out machine.ListResult
	err := o.readConfig(ctx, who, eventMachineTokenList, "GET /machine/token", rightMachineTokens, Target{},
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text("serial: "+q.Serial+", hostname: "+q.Machine.Hostname, 512)
			var err error
			out, err = o.s.machineTokens.List(ctx, q)
			return err
		})
	return out, err
}

// MachineApplications describes the machine applications and their
// options per token type (any administrator).
func (o *Ops) MachineApplications(ctx context.Context, who caller.Caller) (map[string]map[string]map[string]map[string]machine.OptionSpec, error) {
	var out map[string]map[string]map[string]map[string]machine.OptionSpec
	err := o.readConfig(ctx, who, eventMachineApplications, "GET /application/", "", Target{},
		func(ctx context.Context, r *opRun) error {
			var err error
			out, err = o.s.machineTokens.Apps().Describe(ctx)
			return err
		})
	return out, err
}

// MachineAuthItems returns the authentication items of the machine
// tokens of req.Hostname (or of a service_id filter), per application
// (right fetch_authentication_items).
func (o *Ops) MachineAuthItems(ctx context.Context, who caller.Caller, req machine.AuthItemRequest) (map[string][]map[string]any, error) {
	var out map[string][]map[string]any
	err := o.readConfig(ctx, who, eventMachineAuthItems, "GET /machine/authitem/"+req.Application, rightAuthItems, Target{},
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text("host: "+req.Hostname+", application: "+req.Application, 512)
			if req.UserAgent == "" {
				req.UserAgent = who.UserAgent
			}
			// Handing out offline values moves the token's counter: the
			// request's entry commits with each such change (a request
			// that hands out the values of two tokens has two entries).
			req.Also = append(req.Also, r.Audit)
			var err error
			out, err = o.s.machineTokens.AuthItems(ctx, req)
			return err
		})
	return out, err
}
