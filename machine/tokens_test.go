package machine_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// mtFinder is a Finder over a fixed machine list.
type mtFinder []machine.Machine

func (f mtFinder) ByHostname(ctx context.Context, hostname string) (machine.Machine, error) {
	var found []machine.Machine
	for _, m := range f {
		if slices.Contains(m.Hostname, hostname) {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 0:
		return machine.Machine{}, fmt.Errorf("hostname %s: %w", hostname, machine.ErrNoMachine)
	case 1:
		return found[0], nil
	}
	return machine.Machine{}, fmt.Errorf("hostname %s: %w", hostname, machine.ErrAmbiguousMachine)
}

func (f mtFinder) Get(ctx context.Context, resolver, id string) (machine.Machine, error) {
	for _, m := range f {
		if m.Resolver == resolver && m.ID == id {
			return m, nil
		}
	}
	return machine.Machine{}, fmt.Errorf("machine %s/%s: %w", resolver, id, machine.ErrNoMachine)
}

// mtTokens is a token source and secret opener over a map.
type mtTokens struct {
	toks    map[string]*token.Token
	secrets map[string][]byte
}

func (s *mtTokens) Get(ctx context.Context, serial string) (*token.Token, error) {
	t, ok := s.toks[serial]
	if !ok {
		return nil, token.NotFound(serial)
	}
	return t.Clone(), nil
}

func (s *mtTokens) Secret(t *token.Token, field string) ([]byte, error) {
	if field != token.FieldKey {
		return nil, nil
	}
	return s.secrets[t.Serial], nil
}

var mtMachines = mtFinder{
	{ID: "192.168.0.1", Hostname: []string{"gandalf", "gandalf.example.com"}, IP: "192.168.0.1", Resolver: "hosts1"},
	{ID: "192.168.0.2", Hostname: []string{"frodo"}, IP: "192.168.0.2", Resolver: "hosts1"},
	{ID: "10.0.0.2", Hostname: []string{"twin"}, IP: "10.0.0.2", Resolver: "hosts1"},
	{ID: "10.0.0.3", Hostname: []string{"twin"}, IP: "10.0.0.3", Resolver: "hosts2"},
}

const (
	aliceKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGe6kq7bF0e0v6b9KqzW7M5lQ2e9s3m6p0ZtP5xk3Y1H alice@laptop"
	bobKey   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB9m1pUQ2dC2o4cS8q1xqvZ7P0m9LhQmFq3s1Yk9xH0v bob@desk"
)

type mtEnv struct {
	st   store.Store
	toks *mtTokens
	sids *machine.ServiceIDs
	mt   *machine.Tokens
	rand *bytes.Reader
}

func newMTEnv(t *testing.T) *mtEnv {
	t.Helper()
	st := storetest.Open(t)
	toks := &mtTokens{toks: map[string]*token.Token{
		"SSHK1": {Serial: "SSHK1", Type: "sshkey", Active: true, Info: map[string]string{token.InfoSSHKey: aliceKey},
			Owner: &user.User{Login: "alice", Realm: "realm1", Resolver: "r1", UID: "1000"}},
		"SSHK2": {Serial: "SSHK2", Type: "sshkey", Active: true, Info: map[string]string{token.InfoSSHKey: bobKey}},
		"SSHK3": {Serial: "SSHK3", Type: "sshkey", Active: false, Info: map[string]string{token.InfoSSHKey: bobKey}},
		"UBOM1": {Serial: "UBOM1", Type: "totp", Active: true, Info: map[string]string{}},
		"TOTP1": {Serial: "TOTP1", Type: "totp", Active: true, Info: map[string]string{}},
		"HOTP1": {Serial: "HOTP1", Type: "hotp", Active: true, Info: map[string]string{}},
	}, secrets: map[string][]byte{
		"UBOM1": []byte("12345678901234567890"),
		"TOTP1": []byte("12345678901234567890"),
	}}
	sids := machine.NewServiceIDs(st)
	rnd := bytes.NewReader(bytes.Repeat([]byte{0xab}, 1024))
	mt := machine.NewTokens(machine.TokensConfig{Store: st, Tokens: toks, Machines: mtMachines,
		Apps: machine.NewApps(machine.NewSSH(sids), machine.NewLUKS(toks, rnd))})
	return &mtEnv{st: st, toks: toks, sids: sids, mt: mt, rand: rnd}
}

func (e *mtEnv) attach(t *testing.T, req machine.AttachRequest) int {
	t.Helper()
	id, err := e.mt.Attach(t.Context(), req)
	if err != nil {
		t.Fatalf("attach %+v: %v", req, err)
	}
	return id
}

func wantAPIErr(t *testing.T, err error, code apierr.Code, msg string) {
	t.Helper()
	var ae *apierr.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an apierr.Error", err)
	}
	if ae.Code != code || (msg != "" && ae.Error() != msg) {
		t.Fatalf("error = %v (code %d); want code %d %q", ae, ae.Code, code, msg)
	}
}

func TestServiceIDStore(t *testing.T) {
	ctx := t.Context()
	s := machine.NewServiceIDs(storetest.Open(t))
	id1, err := s.Set(ctx, "webserver", "the web servers")
	if err != nil || id1 != 1 {
		t.Fatalf("Set = %d, %v", id1, err)
	}
	id2, err := s.Set(ctx, "mail", "")
	if err != nil || id2 != 2 {
		t.Fatalf("Set mail = %d, %v", id2, err)
	}
	if id, err := s.Set(ctx, "webserver", "changed"); err != nil || id != id1 {
		t.Fatalf("update = %d, %v; want the same id %d", id, err, id1)
	}
	list, err := s.List(ctx)
	want := []machine.ServiceID{{ID: 2, Name: "mail"}, {ID: 1, Name: "webserver", Description: "changed"}}
	if err != nil || !slices.Equal(list, want) {
		t.Fatalf("List = %+v, %v; want %+v", list, err, want)
	}
	if names, _ := s.Names(ctx); !slices.Equal(names, []string{"mail", "webserver"}) {
		t.Errorf("Names = %v", names)
	}
	if sid, err := s.Get(ctx, "webserver"); err != nil || sid.Description != "changed" {
		t.Errorf("Get = %+v, %v", sid, err)
	}
	_, err = s.Get(ctx, "nope")
	wantAPIErr(t, err, apierr.ResourceNotFound, "The requested Serviceid could not be found.")
	if id, err := s.Delete(ctx, "mail"); err != nil || id != 2 {
		t.Fatalf("Delete = %d, %v", id, err)
	}
	_, err = s.Delete(ctx, "mail")
	wantAPIErr(t, err, apierr.ResourceNotFound, "The requested Serviceid could not be found.")
	for _, bad := range []string{"", "  ", "a/b", strings.Repeat("x", 256)} {
		if _, err := s.Set(ctx, bad, ""); !apierr.Is(err, apierr.Parameter) {
			t.Errorf("Set(%q) = %v; want a parameter error", bad, err)
		}
	}
	// A failing hook rolls the write back.
	boom := errors.New("boom")
	if _, err := s.Set(ctx, "rolled", "", func(store.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Set with failing hook = %v", err)
	}
	if _, err := s.Get(ctx, "rolled"); !apierr.Is(err, apierr.ResourceNotFound) {
		t.Errorf("a rolled-back service ID exists: %v", err)
	}
}

func TestAttachErrors(t *testing.T) {
	e := newMTEnv(t)
	ctx := t.Context()
	_, err := e.mt.Attach(ctx, machine.AttachRequest{Serial: "NOPE", Application: "ssh"})
	wantAPIErr(t, err, apierr.ResourceNotFound, "Token with serial NOPE does not exist.")
	_, err = e.mt.Attach(ctx, machine.AttachRequest{Serial: "SSHK1", Application: "vpn"})
	wantAPIErr(t, err, apierr.Parameter, "Application vpn is not supported. Valid applications are dict_keys(['luks', 'ssh']).")
	_, err = e.mt.Attach(ctx, machine.AttachRequest{Serial: "SSHK1", Application: "ssh", Machine: machine.MachineRef{Hostname: "twin"}})
	if !errors.Is(err, machine.ErrAmbiguousMachine) {
		t.Errorf("ambiguous hostname: %v", err)
	}
	_, err = e.mt.Attach(ctx, machine.AttachRequest{Serial: "SSHK1", Application: "ssh", Machine: machine.MachineRef{Hostname: "nowhere"}})
	if !errors.Is(err, machine.ErrNoMachine) {
		t.Errorf("unknown hostname: %v", err)
	}
	_, err = e.mt.Attach(ctx, machine.AttachRequest{Serial: "SSHK1", Application: "ssh", Machine: machine.MachineRef{MachineID: "192.168.0.1"}})
	if !errors.Is(err, machine.ErrIncompleteMachine) {
		t.Errorf("machineid without resolver: %v", err)
	}
	_, err = e.mt.Attach(ctx, machine.AttachRequest{Serial: "SSHK1", Application: "ssh", Machine: machine.MachineRef{MachineID: "1.2.3.4", Resolver: "hosts1"}})
	if !errors.Is(err, machine.ErrNoMachine) {
		t.Errorf("unknown machine id: %v", err)
	}
	_, err = e.mt.Attach(ctx, machine.AttachRequest{Serial: "SSHK1", Application: "ssh", Options: map[string]string{"x": strings.Repeat("v", 5000)}})
	if !apierr.Is(err, apierr.Parameter) {
		t.Errorf("oversized option: %v", err)
	}
	if res, err := e.mt.List(ctx, machine.Query{}); err != nil || len(res.Tokens) != 0 {
		t.Errorf("failed attaches left bindings: %+v, %v", res.Tokens, err)
	}
}

func TestListFiltersAndSort(t *testing.T) {
	e := newMTEnv(t)
	ctx := t.Context()
	idA := e.attach(t, machine.AttachRequest{Serial: "SSHK1", Application: "ssh", Options: map[string]string{"service_id": "webserver", "user": "root"}})
	idB := e.attach(t, machine.AttachRequest{Serial: "SSHK2", Application: "ssh", Options: map[string]string{"service_id": "WebServer2", "user": "admin"}})
	idC := e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{Hostname: "gandalf.example.com"},
		Options: map[string]string{"slot": "1", "partition": "/dev/sdb1"}})
	idD := e.attach(t, machine.AttachRequest{Serial: "TOTP1", Application: "luks", Machine: machine.MachineRef{MachineID: "192.168.0.2", Resolver: "hosts1"}})

	ids := func(res machine.ListResult) []int {
		var out []int
		for _, l := range res.Tokens {
			out = append(out, l.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    machine.Query
		want []int
	}{
		{"all", machine.Query{}, []int{idA, idB, idD, idC}},
		{"machine by hostname", machine.Query{Machine: machine.MachineRef{Hostname: "gandalf"}}, []int{idC}},
		{"machine by id", machine.Query{Machine: machine.MachineRef{MachineID: "192.168.0.2", Resolver: "hosts1"}}, []int{idD}},
		{"any machine", machine.Query{Machine: machine.MachineRef{MachineID: machine.AnyMachine}}, []int{idA, idB, idD, idC}},
		{"service_id overrules hostname", machine.Query{Machine: machine.MachineRef{Hostname: "gandalf"},
			Options: map[string]string{"service_id": "webserver"}}, []int{idA}},
		{"application", machine.Query{Application: "luks"}, []int{idD, idC}},
		{"serial exact", machine.Query{Serial: "SSHK2"}, []int{idB}},
		{"serial exact is case-sensitive", machine.Query{Serial: "sshk2"}, nil},
		{"serial wildcard case-insensitive", machine.Query{Serial: "sshk*"}, []int{idA, idB}},
		{"serial wildcard with regexp characters", machine.Query{Serial: "SSH.*"}, nil},
		{"option wildcard", machine.Query{Options: map[string]string{"service_id": "web*"}}, []int{idA, idB}},
		{"option exact", machine.Query{Options: map[string]string{"user": "admin"}}, []int{idB}},
		{"missing option is empty", machine.Query{Options: map[string]string{"slot": "1"}}, []int{idC}},
		{"sort by option", machine.Query{Application: "ssh", SortBy: "user"}, []int{idB, idA}},
		{"sort by serial desc", machine.Query{Application: "ssh", Desc: true}, []int{idB, idA}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.mt.List(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(res); !slices.Equal(got, tc.want) {
				t.Errorf("ids = %v; want %v", got, tc.want)
			}
		})
	}
	res, err := e.mt.List(ctx, machine.Query{Machine: machine.MachineRef{Hostname: "gandalf"}})
	if err != nil || res.MachineID == nil || *res.MachineID != "192.168.0.1" || *res.Resolver != "hosts1" {
		t.Fatalf("machine echo = %v %v, %v", res.MachineID, res.Resolver, err)
	}
	if l := res.Tokens[0]; l.Type != "totp" || l.Options["partition"] != "/dev/sdb1" || l.MachineID != "192.168.0.1" {
		t.Errorf("listed = %+v", l)
	}
	if res, _ := e.mt.List(ctx, machine.Query{}); res.MachineID != nil || res.Resolver != nil {
		t.Errorf("no machine asked, echo %v %v", res.MachineID, res.Resolver)
	}
	if _, err := e.mt.List(ctx, machine.Query{Machine: machine.MachineRef{Resolver: "hosts1"}}); !errors.Is(err, machine.ErrIncompleteMachine) {
		t.Errorf("resolver alone: %v", err)
	}
	// A binding whose token is gone is not listed.
	delete(e.toks.toks, "SSHK2")
	if res, _ := e.mt.List(ctx, machine.Query{Application: "ssh"}); !slices.Equal(ids(res), []int{idA}) {
		t.Errorf("after the token went: %v", ids(res))
	}
}

func TestOfToken(t *testing.T) {
	e := newMTEnv(t)
	ctx := t.Context()
	id1 := e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{Hostname: "gandalf"}, Options: map[string]string{"slot": "1"}})
	id2 := e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "ssh", Options: map[string]string{"service_id": "web"}})
	list, err := e.mt.OfToken(ctx, "UBOM1")
	if err != nil || len(list) != 2 {
		t.Fatalf("OfToken = %+v, %v", list, err)
	}
	if l := list[0]; l.ID != id1 || l.MachineID != "192.168.0.1" || l.Resolver != "hosts1" || l.Hostname != "gandalf" || l.Options["slot"] != "1" {
		t.Errorf("machine binding = %+v", l)
	}
	if l := list[1]; l.ID != id2 || l.MachineID != machine.AnyMachine || l.Resolver != machine.NoResolver || l.Hostname != machine.AnyHost {
		t.Errorf("machine-less binding = %+v", l)
	}
	// The machine disappears from its resolver.
	e.mt.SetFinder(mtFinder{})
	if list, _ := e.mt.OfToken(ctx, "UBOM1"); list[0].Hostname != machine.UnknownHost {
		t.Errorf("hostname of a vanished machine = %q", list[0].Hostname)
	}
	_, err = e.mt.OfToken(ctx, "NOPE")
	wantAPIErr(t, err, apierr.ResourceNotFound, "The requested Token could not be found.")
	if list, err := e.mt.OfToken(ctx, "SSHK2"); err != nil || len(list) != 0 {
		t.Errorf("token without bindings = %+v, %v", list, err)
	}
}

func TestDetach(t *testing.T) {
	e := newMTEnv(t)
	ctx := t.Context()
	onGandalf := e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{Hostname: "gandalf"}})
	onFrodo := e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{Hostname: "frodo"}})
	noMachine := e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "luks"})
	sshOne := e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "ssh", Options: map[string]string{"service_id": "a"}})
	remaining := func() []int {
		list, err := e.mt.OfToken(ctx, "UBOM1")
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, l := range list {
			out = append(out, l.ID)
		}
		return out
	}
	// By machine id and resolver.
	n, err := e.mt.Detach(ctx, machine.DetachRequest{Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{MachineID: "192.168.0.2", Resolver: "hosts1"}})
	if err != nil || n != 1 || !slices.Equal(remaining(), []int{onGandalf, noMachine, sshOne}) {
		t.Fatalf("detach frodo = %d, %v; left %v (frodo was %d)", n, err, remaining(), onFrodo)
	}
	// By id: the serial and the application must match.
	if n, err := e.mt.Detach(ctx, machine.DetachRequest{Serial: "SSHK1", Application: "luks", ID: onGandalf}); err != nil || n != 0 {
		t.Fatalf("detach by id of another token = %d, %v", n, err)
	}
	if n, err := e.mt.Detach(ctx, machine.DetachRequest{Serial: "UBOM1", Application: "ssh", ID: onGandalf}); err != nil || n != 0 {
		t.Fatalf("detach by id of another application = %d, %v", n, err)
	}
	// An empty machine selects the bindings without one.
	if n, err := e.mt.Detach(ctx, machine.DetachRequest{Serial: "UBOM1", Application: "luks"}); err != nil || n != 1 {
		t.Fatalf("detach machine-less = %d, %v", n, err)
	}
	if !slices.Equal(remaining(), []int{onGandalf, sshOne}) {
		t.Fatalf("left %v", remaining())
	}
	// any machine / no resolver: every binding of the application.
	e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "luks"})
	n, err = e.mt.Detach(ctx, machine.DetachRequest{Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{MachineID: machine.AnyMachine, Resolver: machine.NoResolver}})
	if err != nil || n != 2 || !slices.Equal(remaining(), []int{sshOne}) {
		t.Fatalf("detach any machine = %d, %v; left %v", n, err, remaining())
	}
	// Option filters.
	if n, _ := e.mt.Detach(ctx, machine.DetachRequest{Serial: "UBOM1", Application: "ssh", Options: map[string]string{"service_id": "b"}}); n != 0 {
		t.Errorf("detach with a non-matching option filter removed %d", n)
	}
	if n, _ := e.mt.Detach(ctx, machine.DetachRequest{Serial: "UBOM1", Application: "ssh", ID: sshOne}); n != 1 {
		t.Errorf("detach by id removed %d", n)
	}
	if _, err := e.mt.Detach(ctx, machine.DetachRequest{Serial: "UBOM1"}); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("detach without application: %v", err)
	}
}

func TestSetOptions(t *testing.T) {
	e := newMTEnv(t)
	ctx := t.Context()
	id := e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{Hostname: "gandalf"},
		Options: map[string]string{"slot": "1", "partition": "/dev/sda1"}})
	added, deleted, err := e.mt.SetOptions(ctx, machine.OptionRequest{ID: id, Set: map[string]string{"slot": "2", "extra": "x"}, Delete: []string{"partition", "absent"}})
	if err != nil || added != 2 || deleted != 2 {
		t.Fatalf("SetOptions = %d %d %v", added, deleted, err)
	}
	list, _ := e.mt.OfToken(ctx, "UBOM1")
	if o := list[0].Options; len(o) != 2 || o["slot"] != "2" || o["extra"] != "x" {
		t.Errorf("options = %v", o)
	}
	// By hostname, serial and application.
	if _, _, err := e.mt.SetOptions(ctx, machine.OptionRequest{Serial: "UBOM1", Application: "luks",
		Machine: machine.MachineRef{Hostname: "gandalf.example.com"}, Set: map[string]string{"slot": "3"}}); err != nil {
		t.Fatal(err)
	}
	if list, _ := e.mt.OfToken(ctx, "UBOM1"); list[0].Options["slot"] != "3" {
		t.Errorf("slot = %q", list[0].Options["slot"])
	}
	for name, req := range map[string]machine.OptionRequest{
		"unknown id":        {ID: 999, Set: map[string]string{"a": "b"}},
		"other machine":     {Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{Hostname: "frodo"}, Set: map[string]string{"a": "b"}},
		"other application": {Serial: "UBOM1", Application: "ssh", Machine: machine.MachineRef{Hostname: "gandalf"}, Set: map[string]string{"a": "b"}},
		"no machine":        {Serial: "UBOM1", Application: "luks", Set: map[string]string{"a": "b"}},
	} {
		if _, _, err := e.mt.SetOptions(ctx, req); !errors.Is(err, machine.ErrBindingNotFound) {
			t.Errorf("%s: %v; want ErrBindingNotFound", name, err)
		}
	}
}

func TestRemoveSerialTx(t *testing.T) {
	e := newMTEnv(t)
	ctx := t.Context()
	e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{Hostname: "gandalf"}})
	e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "ssh"})
	keep := e.attach(t, machine.AttachRequest{Serial: "SSHK1", Application: "ssh"})
	// A serial that is a prefix of another is not touched.
	e.toks.toks["UBOM"] = &token.Token{Serial: "UBOM", Type: "totp", Active: true}
	e.attach(t, machine.AttachRequest{Serial: "UBOM", Application: "luks"})
	if err := e.st.Update(ctx, func(tx store.Tx) error { return e.mt.RemoveSerialTx(tx, "UBOM1") }); err != nil {
		t.Fatal(err)
	}
	res, _ := e.mt.List(ctx, machine.Query{})
	var serials []string
	for _, l := range res.Tokens {
		serials = append(serials, l.Serial)
	}
	if !slices.Equal(serials, []string{"SSHK1", "UBOM"}) || res.Tokens[0].ID != keep {
		t.Errorf("left %v", serials)
	}
	if list, _ := e.mt.OfToken(ctx, "UBOM1"); len(list) != 0 {
		t.Errorf("bindings of the removed serial: %+v", list)
	}
}

func TestAuthItemsSSH(t *testing.T) {
	e := newMTEnv(t)
	ctx := t.Context()
	e.attach(t, machine.AttachRequest{Serial: "SSHK1", Application: "ssh", Options: map[string]string{"service_id": "webserver", "user": "root"}})
	e.attach(t, machine.AttachRequest{Serial: "SSHK2", Application: "ssh", Options: map[string]string{"service_id": "webserver", "user": "admin"}})
	e.attach(t, machine.AttachRequest{Serial: "SSHK3", Application: "ssh", Options: map[string]string{"service_id": "webserver", "user": "root"}})
	e.attach(t, machine.AttachRequest{Serial: "SSHK2", Application: "ssh", Options: map[string]string{"service_id": "mail", "user": "root"}})
	// A non-sshkey token attached for ssh gives no item.
	e.attach(t, machine.AttachRequest{Serial: "HOTP1", Application: "ssh", Options: map[string]string{"service_id": "webserver", "user": "root"}})

	items, err := e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "gandalf", Application: "ssh",
		Filter: map[string]string{"service_id": "webserver", "user": "root"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]map[string]any{"ssh": {{"sshkey": aliceKey, "username": "alice", "user": "root", "service_id": "webserver", "serial": nil}}}
	if fmt.Sprint(items) != fmt.Sprint(want) {
		t.Errorf("items = %v; want %v", items, want)
	}
	// Without the user filter: every active key of the service, the
	// unassigned one without a username.
	items, err = e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "any", Filter: map[string]string{"service_id": "webserver"}})
	if err != nil || len(items["ssh"]) != 2 {
		t.Fatalf("items = %v, %v", items, err)
	}
	if it := items["ssh"][1]; it["sshkey"] != bobKey || it["user"] != "admin" || it["username"] != nil {
		t.Errorf("bob's item = %v", it)
	}
	// The request serial is echoed.
	items, _ = e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "x", Serial: "SSHK2", Filter: map[string]string{"service_id": "mail"}})
	if len(items["ssh"]) != 1 || items["ssh"][0]["serial"] != "SSHK2" {
		t.Errorf("serial echo = %v", items)
	}
	// Disabling the token removes its key.
	e.toks.toks["SSHK1"].Active = false
	items, _ = e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "gandalf", Filter: map[string]string{"service_id": "webserver", "user": "root"}})
	if len(items) != 0 {
		t.Errorf("items of a disabled token: %v", items)
	}
	// The machine's tokens when no service_id is given: none here.
	if items, err := e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "gandalf"}); err != nil || len(items) != 0 {
		t.Errorf("machine without tokens = %v, %v", items, err)
	}
	if _, err := e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "nowhere"}); !errors.Is(err, machine.ErrNoMachine) {
		t.Errorf("unknown host: %v", err)
	}
	if _, err := e.mt.AuthItems(ctx, machine.AuthItemRequest{}); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("no hostname: %v", err)
	}
	_, err = e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "gandalf", Application: "vpn"})
	wantAPIErr(t, err, apierr.Parameter, "Application vpn is not supported. Valid applications are dict_keys(['luks', 'ssh']).")
}

func luksResponse(key, challenge []byte) string {
	m := hmac.New(sha1.New, key)
	m.Write(challenge)
	return hex.EncodeToString(m.Sum(nil))
}

func TestAuthItemsLUKS(t *testing.T) {
	e := newMTEnv(t)
	ctx := t.Context()
	e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{Hostname: "gandalf"},
		Options: map[string]string{"slot": "1", "partition": "/dev/sdb1"}})
	// A TOTP token without the UBOM prefix gives no item.
	e.attach(t, machine.AttachRequest{Serial: "TOTP1", Application: "luks", Machine: machine.MachineRef{Hostname: "gandalf"}})

	key := e.toks.secrets["UBOM1"]
	items, err := e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "gandalf", Application: "luks"})
	if err != nil || len(items["luks"]) != 1 {
		t.Fatalf("items = %v, %v", items, err)
	}
	it := items["luks"][0]
	challenge := bytes.Repeat([]byte{0xab}, 32)
	if it["challenge"] != hex.EncodeToString(challenge) || it["response"] != luksResponse(key, challenge) ||
		it["slot"] != "1" || it["partition"] != "/dev/sdb1" || it["serial"] != nil {
		t.Errorf("item = %v", it)
	}
	// A given challenge is answered.
	items, _ = e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "gandalf.example.com", Challenge: "00ff10"})
	if it := items["luks"][0]; it["challenge"] != "00ff10" || it["response"] != luksResponse(key, []byte{0, 0xff, 0x10}) {
		t.Errorf("item = %v", it)
	}
	if _, err := e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "gandalf", Challenge: "xyz"}); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("non-hex challenge: %v", err)
	}
	// SHA-256 tokens answer with their hash.
	e.toks.toks["UBOM1"].Info[token.InfoHashlib] = "sha256"
	items, _ = e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "gandalf", Challenge: "01"})
	if r, _ := items["luks"][0]["response"].(string); len(r) != 64 {
		t.Errorf("sha256 response %q", r)
	}
	e.toks.toks["UBOM1"].Active = false
	if items, _ := e.mt.AuthItems(ctx, machine.AuthItemRequest{Hostname: "gandalf"}); len(items) != 0 {
		t.Errorf("items of an inactive token: %v", items)
	}
}

func TestDescribeApps(t *testing.T) {
	e := newMTEnv(t)
	ctx := t.Context()
	d, err := e.mt.Apps().Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := d["ssh"]["options"]["sshkey"]["service_id"].Value.([]string); len(v) != 0 {
		t.Errorf("service IDs before any exist: %v", v)
	}
	if _, err := e.sids.Set(ctx, "webserver", ""); err != nil {
		t.Fatal(err)
	}
	d, _ = e.mt.Apps().Describe(ctx)
	if v := d["ssh"]["options"]["sshkey"]["service_id"].Value.([]string); !slices.Equal(v, []string{"webserver"}) {
		t.Errorf("service IDs = %v", v)
	}
	if s := d["ssh"]["options"]["sshkey"]["user"]; s.Type != "str" || s.Description == "" {
		t.Errorf("user option = %+v", s)
	}
	if s := d["luks"]["options"]["totp"]["slot"]; s.Type != "int" || !slices.Equal(s.Value.([]int), []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("slot = %+v", s)
	}
	if s := d["luks"]["options"]["totp"]["partition"]; s.Type != "str" || s.Value != nil {
		t.Errorf("partition = %+v", s)
	}
	if names := e.mt.Apps().Names(); !slices.Equal(names, []string{"luks", "ssh"}) {
		t.Errorf("names = %v", names)
	}
}

// TestHasBindings: whether an application has any binding follows
// attachments and detachments at once, also on a second service on the
// same store (another node), and a request pinned to the current
// revision gets it too.
func TestHasBindings(t *testing.T) {
	e := newMTEnv(t)
	ctx := t.Context()
	other := machine.NewTokens(machine.TokensConfig{Store: e.st, Tokens: e.toks, Machines: mtMachines,
		Apps: machine.NewApps(machine.NewSSH(e.sids), machine.NewLUKS(e.toks, e.rand))})
	has := func(mt *machine.Tokens, ctx context.Context, app string) bool {
		t.Helper()
		ok, err := mt.HasBindings(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	revision := func() uint64 {
		var rev uint64
		if err := e.st.View(ctx, func(tx store.Tx) error { rev = store.ConfigRevision(tx); return nil }); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	before := revision()
	if has(e.mt, ctx, "luks") || has(other, ctx, "luks") {
		t.Fatal("no binding yet, but HasBindings says luks has one")
	}
	id := e.attach(t, machine.AttachRequest{Serial: "UBOM1", Application: "luks", Machine: machine.MachineRef{Hostname: "gandalf"}})
	after := revision()
	if after == before {
		t.Fatal("an attachment did not bump the configuration revision")
	}
	if !has(e.mt, ctx, "luks") || !has(other, ctx, "luks") {
		t.Error("after an attachment HasBindings says luks has none")
	}
	if has(e.mt, ctx, "ssh") {
		t.Error("HasBindings says ssh has a binding; only luks has")
	}
	// Pinned to the current revision: the answer kept for it.
	if !has(e.mt, store.WithRevision(ctx, after), "luks") {
		t.Error("pinned to the current revision, HasBindings says luks has none")
	}
	if n, err := e.mt.Detach(ctx, machine.DetachRequest{Serial: "UBOM1", Application: "luks", ID: id}); err != nil || n != 1 {
		t.Fatalf("detach: %d, %v", n, err)
	}
	if has(e.mt, ctx, "luks") || has(other, ctx, "luks") {
		t.Error("after the detachment HasBindings still says luks has one")
	}
}
