package authsrv

import (
	"context"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/machine"
)

// Rights of the machine resolvers and the machine list (admin scope).
const (
	rightMResolverRead   = "mresolverread"
	rightMResolverWrite  = "mresolverwrite"
	rightMResolverDelete = "mresolverdelete"
	rightMachineList     = "machinelist"
)

// MachineResolvers returns the machine resolvers: their definitions,
// their machines and the machine lookups the machine tokens use.
func (s *Server) MachineResolvers() *machine.Resolvers { return s.machines }

// MachineResolverListRequest selects machine resolver definitions.
type MachineResolverListRequest struct {
	// Name selects one resolver (ignoring case); "" lists all.
	Name string
	// Type selects a type ("" for all); ignored with Name.
	Type string
}

// MachineResolvers lists machine resolver definitions, passwords censored
// (right mresolverread, event get_machineresolver). An unknown Name gives
// an empty list, as privacyIDEA answers {}.
func (o *Ops) MachineResolvers(ctx context.Context, who caller.Caller, req MachineResolverListRequest) ([]machine.Def, error) {
	var out []machine.Def
	err := o.readConfig(ctx, who, "get_machineresolver", "GET /machineresolver/"+req.Name, rightMResolverRead, Target{}, func(ctx context.Context, r *opRun) error {
		if req.Name != "" {
			d, ok, err := o.s.machines.Definition(ctx, req.Name)
			out = []machine.Def{}
			if ok {
				out = append(out, d)
			}
			return err
		}
		var err error
		out, err = o.s.machines.List(ctx, req.Type)
		return err
	})
	return out, err
}

// SetMachineResolver creates or updates the machine resolver name from
// params ("type" and the type's parameters; see machine.Resolvers.Set)
// and returns its id (right mresolverwrite, event set_machineresolver).
func (o *Ops) SetMachineResolver(ctx context.Context, who caller.Caller, name string, params map[string]string) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "set_machineresolver", action: "POST /machineresolver/" + name, right: rightMResolverWrite},
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = "machineresolver: " + name
			var err error
			id, err = o.s.machines.Set(ctx, name, params, r.Audit)
			return err
		})
	return id, err
}

// DeleteMachineResolver removes the machine resolver name and returns its
// id (right mresolverdelete, event delete_machineresolver).
func (o *Ops) DeleteMachineResolver(ctx context.Context, who caller.Caller, name string) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "delete_machineresolver", action: "DELETE /machineresolver/" + name, right: rightMResolverDelete},
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = "machineresolver: " + name
			var err error
			id, err = o.s.machines.Delete(ctx, name, r.Audit)
			return err
		})
	return id, err
}

// TestMachineResolver tries a machine resolver configuration without
// saving it (administrators only, no right, as in privacyIDEA; event
// test_machineresolver). stored names a saved resolver whose passwords
// replace censored values. It returns the test's result and description.
func (o *Ops) TestMachineResolver(ctx context.Context, who caller.Caller, params map[string]string, stored string) (bool, string, error) {
	var ok bool
	var desc string
	err := o.readConfig(ctx, who, "test_machineresolver", "POST /machineresolver/test", "", Target{}, func(ctx context.Context, r *opRun) error {
		var err error
		ok, desc, err = o.s.machines.Test(ctx, params, stored)
		return err
	})
	return ok, desc, err
}

// ListMachines lists the machines of the machine resolvers that f selects
// (right machinelist, event list_machines).
func (o *Ops) ListMachines(ctx context.Context, who caller.Caller, f machine.MachineFilter) ([]machine.Machine, error) {
	var out []machine.Machine
	err := o.readConfig(ctx, who, "list_machines", "GET /machine/", rightMachineList, Target{}, func(ctx context.Context, r *opRun) error {
		r.Entry.Info = "hostname: " + f.Hostname + ", ip: " + f.IP
		var err error
		out, err = o.s.machines.Machines(ctx, f)
		return err
	})
	return out, err
}
