package authsrv_test

import (
	"fmt"
	"testing"

	"github.com/authsrv/authsrv/caller"
)

// TestAdminOps: the local administrator accounts change only for a
// trusted caller, each change with its audit entry; an API administrator
// is refused, audited, and changes nothing.
func TestAdminOps(t *testing.T) {
	s := configServer(t)
	ctx, local := t.Context(), caller.Caller{UserAgent: "authsrv-cli"}
	steps := []struct {
		name, action string
		run          func(who caller.Caller) error
	}{
		{"add", "POST /admins", func(who caller.Caller) error { return s.Ops().AddAdmin(ctx, who, "ops1", "s3cret-pw-1") }},
		{"passwd", "PUT /admins/ops1", func(who caller.Caller) error { return s.Ops().SetAdminPassword(ctx, who, "ops1", "s3cret-pw-2") }},
		{"disable", "POST /admins/ops1/disable", func(who caller.Caller) error { return s.Ops().SetAdminDisabled(ctx, who, "ops1", true) }},
		{"enable", "POST /admins/ops1/enable", func(who caller.Caller) error { return s.Ops().SetAdminDisabled(ctx, who, "ops1", false) }},
		{"delete", "DELETE /admins/ops1", func(who caller.Caller) error { return s.Ops().DeleteAdmin(ctx, who, "ops1") }},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := len(auditRows(t, s))
			if err := st.run(caller.Caller{Role: caller.Admin, Name: "someone"}); err == nil {
				t.Fatal("an API administrator changed a local administrator")
			}
			if err := st.run(local); err != nil {
				t.Fatal(err)
			}
			rows := auditRows(t, s)
			if len(rows) != before+2 {
				t.Fatalf("%d audit entries, want 2", len(rows)-before)
			}
			refused, done := rows[len(rows)-2], rows[len(rows)-1]
			if fmt.Sprint(refused["success"]) != "0" || refused["administrator"] != "someone" {
				t.Errorf("refusal audited as %v", refused)
			}
			if fmt.Sprint(done["success"]) != "1" || done["action"] != st.action || done["info"] != "administrator ops1" {
				t.Errorf("change audited as %v", done)
			}
			for _, r := range rows[before:] {
				for _, v := range r {
					if s, ok := v.(string); ok && (s == "s3cret-pw-1" || s == "s3cret-pw-2") {
						t.Errorf("a password in the audit: %v", r)
					}
				}
			}
		})
	}
	if ok, err := s.Admins().Exists(ctx, "ops1"); err != nil || ok {
		t.Errorf("ops1 exists after delete: %v %v", ok, err)
	}
}
