package policy_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/policy"
)

func defsBuiltin(t *testing.T) *policy.Defs {
	t.Helper()
	d := policy.NewDefs()
	if err := d.Add(policy.Builtin()...); err != nil {
		t.Fatal(err)
	}
	return d
}

// defsExpected lists, per scope, every action the spec names: admin-config
// §8 for admin, validate-token-auth §6 for the rest, §2 for webui.
var defsExpected = map[string]string{
	policy.ScopeAdmin: `
		policyread policywrite policydelete resolverread resolverwrite resolverdelete userlist adduser
		updateuser deleteuser get_user_internal_attributes set_custom_user_attributes
		delete_custom_user_attributes machinelist manage_machine_tokens fetch_authentication_items
		mresolverread mresolverwrite mresolverdelete serviceid_add serviceid_list serviceid_delete
		smsgateway_read smsgateway_write smtpserver_read smtpserver_write radiusserver_read
		radiusserver_write privacyideaserver_read privacyideaserver_write caconnectorread
		caconnectorwrite caconnectordelete eventhandling_read eventhandling_write periodictask_read
		periodictask_write statistics_read statistics_delete clienttype managesubscription
		api_client_list api_client_add api_client_edit api_client_rotate api_client_delete
		remembered_device_list remembered_device_revoke
		enable disable set setdescription setpin setrandompin settokeninfo enrollpin resync reset revoke
		assign unassign importtokens delete tokenrealms tokenlist getserial getrandom copytokenpin
		copytokenuser losttoken configwrite configdelete configread system_documentation
		otp_pin_maxlength otp_pin_minlength otp_pin_contents otp_pin_set_random
		auditlog auditlog_download auditlog_age hide_audit_columns set_hsm_password getchallenges
		cancelchallenge triggerchallenge hide_tokeninfo tokengroup_list tokengroup_add
		tokengroup_delete tokengroups
		container_info container_create container_delete container_list container_add_token
		container_remove_token container_assign_user container_unassign_user
		enrollHOTP enrollTOTP enrollMOTP enrollDAYPASSWORD enrollSPASS enrollPW enrollREGISTRATION
		enrollAPPLSPEC enrollEMAIL enrollSMS enrollPAPER enrollTAN enrollINDEXEDSECRET
		enrollQUESTION enrollSSHKEY enrollYUBIKEY enrollRADIUS
		hotp_otp_pin_maxlength totp_otp_pin_minlength sms_otp_pin_contents
		hotp_hashlib hotp_otplen totp_hashlib totp_otplen totp_timestep`,
	policy.ScopeUser: `
		enrollHOTP enrollTOTP enrollSPASS enrollPW enrollEMAIL enrollSMS enrollREGISTRATION enrollPAPER
		enrollTAN enrollINDEXEDSECRET enrollSSHKEY
		assign unassign enable disable delete resync reset setpin setrandompin setdescription revoke
		enrollpin otp_pin_maxlength otp_pin_minlength otp_pin_contents otp_pin_set_random
		set_custom_user_attributes delete_custom_user_attributes auditlog updateuser userlist
		hotp_hashlib hotp_otplen totp_hashlib totp_otplen totp_timestep`,
	policy.ScopeAuthentication: `
		otppin challenge_response challenge_text challenge_text_header challenge_text_footer passthru
		passthru_ignore_rollout_state passthru_assign passOnNoToken passonnotoken_ignore_rollout_state
		passOnNoUser mangle set_realm reset_all_user_tokens increase_failcounter_on_challenge
		auth_cache preferred_client_mode force_challenge_response client_mode_per_user
		disabled_token_types change_pin_via_validate resync_via_multichallenge
		enroll_via_multichallenge enroll_via_multichallenge_text enroll_via_multichallenge_template
		enroll_via_multichallenge_optional enroll_via_multichallenge_passkey_offline
		hide_specific_error_message remember_device remember_device_validity
		remember_device_max_devices emailtext emailsubject emailautosend smstext smsautosend
		indexedsecret_count push_wait email_challenge_text sms_challenge_text
		indexedsecret_challenge_text hotp_challenge_text`,
	policy.ScopeAuthorization: `
		authorized application_tokentype auth_max_success auth_max_fail last_auth tokentype serial
		tokeninfo setrealm no_detail_on_success no_detail_on_fail add_user_in_response
		add_resolver_in_response api_key_required require_auth_for_resolver_details`,
	policy.ScopeEnrollment: `
		max_token_per_user max_token_per_realm otp_pin_random encrypt_pin tokenlabel tokenissuer
		autoassignment verify_enrollment losttoken_PW_length losttoken_PW_contents losttoken_valid
		papertoken_count tantoken_count hotp_hashlib hotp_otplen totp_hashlib totp_otplen
		totp_timestep hotp_force_server_generate totp_force_server_generate`,
	policy.ScopeWebUI: `
		login_mode remote_user jwt_validity logout_time timeout_action token_page_size user_page_size
		audit_page_size default_tokentype realm_dropdown hide_welcome`,
	policy.ScopeHardening: `hide_version hide_auth_error_status`,
	policy.ScopeToken:     `hide_specific_error_message_for_offline_refill`,
	policy.ScopeRegister:  `realm resolver`,
	policy.ScopeContainer: `container_server_url container_registration_ttl`,
}

func TestDefsBuiltinNamesTheSpec(t *testing.T) {
	d := defsBuiltin(t)
	for scope, names := range defsExpected {
		for _, n := range strings.Fields(names) {
			if _, ok := d.Lookup(scope, n); !ok {
				t.Errorf("%s: action %q missing", scope, n)
			}
		}
	}
	// Users list only their own tokens (validate-token-auth §6.3).
	if _, ok := d.Lookup(policy.ScopeUser, "tokenlist"); ok {
		t.Error("user scope has tokenlist")
	}
}

func TestDefsBuiltinIsWellFormed(t *testing.T) {
	seen := map[[2]string]bool{}
	for _, a := range policy.Builtin() {
		k := [2]string{a.Scope, a.Name}
		if seen[k] {
			t.Errorf("%s/%s defined twice", a.Scope, a.Name)
		}
		seen[k] = true
		if a.Desc == "" {
			t.Errorf("%s/%s has no description", a.Scope, a.Name)
		}
		if a.Type == policy.TypeBool && len(a.Values) > 0 {
			t.Errorf("%s/%s: a bool with values", a.Scope, a.Name)
		}
	}
	// A second Add of the same set fails and changes nothing.
	d := defsBuiltin(t)
	before := len(d.Scope(policy.ScopeAdmin))
	if err := d.Add(policy.ActionDef{Scope: "admin", Name: "brandnew", Type: "bool"}, policy.Builtin()[0]); err == nil {
		t.Error("duplicate accepted")
	}
	if _, ok := d.Lookup("admin", "brandnew"); ok || len(d.Scope(policy.ScopeAdmin)) != before {
		t.Error("a failed Add left definitions behind")
	}
}

func TestDefsTypes(t *testing.T) {
	d := defsBuiltin(t)
	cases := []struct {
		scope, name, typ string
		values           []string
	}{
		{"authentication", "otppin", "str", []string{"tokenpin", "userstore", "none"}},
		{"authorization", "authorized", "str", []string{"grant_access", "deny_access"}},
		{"webui", "login_mode", "str", []string{"userstore", "privacyIDEA", "disable"}},
		{"enrollment", "autoassignment", "str", []string{"any_pin", "userstore"}},
		{"admin", "enable", "bool", nil},
		{"admin", "otp_pin_maxlength", "int", nil},
		{"authentication", "smstext", "text", nil},
		{"webui", "jwt_validity", "int", nil},
		{"hardening", "hide_version", "bool", nil},
	}
	for _, tc := range cases {
		a, ok := d.Lookup(tc.scope, tc.name)
		if !ok || a.Type != tc.typ || !slices.Equal(a.Values, tc.values) {
			t.Errorf("%s/%s = %+v %v", tc.scope, tc.name, a, ok)
		}
	}
}

func TestDefsAddRejects(t *testing.T) {
	cases := []struct {
		name string
		def  policy.ActionDef
	}{
		{"bad type", policy.ActionDef{Scope: "admin", Name: "x", Type: "float"}},
		{"bad scope", policy.ActionDef{Scope: "nope", Name: "x", Type: "bool"}},
		{"empty name", policy.ActionDef{Scope: "admin", Name: "", Type: "bool"}},
		{"comma", policy.ActionDef{Scope: "admin", Name: "a,b", Type: "bool"}},
		{"equals", policy.ActionDef{Scope: "admin", Name: "a=b", Type: "bool"}},
		{"negation", policy.ActionDef{Scope: "admin", Name: "!a", Type: "bool"}},
		{"star", policy.ActionDef{Scope: "admin", Name: "*", Type: "bool"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := policy.NewDefs().Add(tc.def); err == nil {
				t.Errorf("accepted %+v", tc.def)
			}
		})
	}
	d := policy.NewDefs()
	two := policy.ActionDef{Scope: "admin", Name: "x", Type: "bool"}
	if err := d.Add(two, two); err == nil {
		t.Error("duplicate within one call accepted")
	}
}

func TestDefsScopes(t *testing.T) {
	d := defsBuiltin(t)
	want := []string{"admin", "audit", "authentication", "authorization", "container", "enrollment",
		"hardening", "register", "selfservice", "system", "token", "user", "webui"}
	if got := d.Scopes(); !slices.Equal(got, want) {
		t.Errorf("Scopes = %v", got)
	}
	for _, s := range want {
		if !d.ValidScope(s) {
			t.Errorf("%s not valid", s)
		}
		if d.Checked(s) == (s == "system" || s == "selfservice") {
			t.Errorf("Checked(%s) = %v", s, d.Checked(s))
		}
	}
	if d.ValidScope("foo") || d.Checked("foo") || d.Scope("foo") != nil || d.JSON("foo") != nil {
		t.Error("unknown scope accepted")
	}
	if m := d.Scope("audit"); m == nil || len(m) != 0 {
		t.Errorf("Scope(audit) = %v, want empty", m)
	}
	if d.JSON("audit") != nil {
		t.Error("JSON(audit) is not null")
	}
	// Scope returns a copy.
	m := d.Scope("authentication")
	a := m["otppin"]
	a.Values[0] = "changed"
	delete(m, "otppin")
	if b, ok := d.Lookup("authentication", "otppin"); !ok || b.Values[0] != "tokenpin" {
		t.Error("Scope exposed the registry")
	}
}

func TestDefsJSON(t *testing.T) {
	d := defsBuiltin(t)
	raw, err := json.Marshal(d.AllJSON())
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]map[string]any
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	wantScopes := []string{"admin", "authentication", "authorization", "container", "enrollment",
		"hardening", "register", "token", "user", "webui"}
	var got []string
	for s := range all {
		got = append(got, s)
	}
	slices.Sort(got)
	if !slices.Equal(got, wantScopes) {
		t.Errorf("scopes %v, want %v", got, wantScopes)
	}
	allowed := map[string]bool{"type": true, "desc": true, "group": true, "value": true, "mainmenu": true, "multiple": true}
	for s, acts := range all {
		for n, e := range acts {
			if _, ok := e["type"].(string); !ok {
				t.Errorf("%s/%s: no type", s, n)
			}
			if _, ok := e["desc"].(string); !ok {
				t.Errorf("%s/%s: no desc", s, n)
			}
			for k := range e {
				if !allowed[k] {
					t.Errorf("%s/%s: unexpected key %q", s, n, k)
				}
			}
			if m, ok := e["multiple"]; ok && m != true {
				t.Errorf("%s/%s: multiple = %v", s, n, m)
			}
		}
	}
	cases := []struct {
		scope, name, want string
	}{
		{"authentication", "otppin", `{"desc":"What the PIN part of the password is checked against: the token PIN, the user store password, or nothing.","group":"general","type":"str","value":["tokenpin","userstore","none"]}`},
		{"enrollment", "hotp_otplen", `{"desc":"OTP length of new HOTP tokens.","group":"token","type":"int","value":[6,8]}`},
		{"admin", "tokenlist", `{"desc":"List tokens; the realms of the matching policies limit which tokens are shown.","group":"token","mainmenu":["tokens"],"type":"bool"}`},
		{"authentication", "mangle", `{"desc":"Rewrite a request parameter before authentication, written key/regex/replacement/ for user, pass or realm.","group":"general","multiple":true,"type":"str"}`},
	}
	for _, tc := range cases {
		b, _ := json.Marshal(d.JSON(tc.scope)[tc.name])
		if string(b) != tc.want {
			t.Errorf("%s/%s:\n got %s\nwant %s", tc.scope, tc.name, b, tc.want)
		}
	}
}

func TestDefsConditionDefs(t *testing.T) {
	c := policy.ConditionDefs()
	sections, _ := c["sections"].(map[string]any)
	comparators, _ := c["comparators"].(map[string]any)
	missing, _ := c["handle_missing_data"].(map[string]any)
	if len(c) != 3 || len(sections) != 8 || len(comparators) != 16 || len(missing) != 3 {
		t.Fatalf("ConditionDefs has %d keys, %d sections, %d comparators, %d modes", len(c), len(sections), len(comparators), len(missing))
	}
	for _, s := range policy.Sections() {
		if e, ok := sections[s].(map[string]any); !ok || e["description"] == "" {
			t.Errorf("section %q missing", s)
		}
	}
	for _, s := range policy.Comparators() {
		if e, ok := comparators[s].(map[string]any); !ok || e["description"] == "" {
			t.Errorf("comparator %q missing", s)
		}
	}
	display := map[string]string{
		policy.MissingRaise: "Raise an error", policy.MissingTrue: "Condition is true", policy.MissingFalse: "Condition is false",
	}
	for mode, want := range display {
		e, _ := missing[mode].(map[string]any)
		if e["display_value"] != want || e["description"] == "" {
			t.Errorf("mode %s = %v", mode, e)
		}
	}
	if _, err := json.Marshal(c); err != nil {
		t.Error(err)
	}
}
