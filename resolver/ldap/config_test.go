package ldap_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/resolver"
	ldapresolver "github.com/authsrv/authsrv/resolver/ldap"
)

func TestType(t *testing.T) {
	typ := ldapresolver.Type()
	if typ.Name != "ldapresolver" {
		t.Errorf("Name = %q", typ.Name)
	}
	types := map[string]resolver.ParamType{}
	for _, p := range typ.Params {
		types[p.Name] = p.Type
	}
	for _, name := range []string{"LDAPURI", "LDAPBASE", "AUTHTYPE", "BINDDN", "TIMEOUT", "CACHE_TIMEOUT", "SIZELIMIT",
		"LOGINNAMEATTRIBUTE", "LDAPSEARCHFILTER", "LDAPFILTER", "MULTIVALUEATTRIBUTES", "USERINFO", "UIDTYPE",
		"NOREFERRALS", "NOSCHEMAS", "EDITABLE", "START_TLS", "TLS_VERIFY", "TLS_VERSION", "TLS_CA_FILE", "SCOPE",
		"OBJECT_CLASSES", "DN_TEMPLATE"} {
		if _, ok := types[name]; !ok {
			t.Errorf("parameter %s missing", name)
		}
	}
	if types["BINDPW"] != resolver.Password {
		t.Errorf("BINDPW is %q, want password", types["BINDPW"])
	}
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{{"", 120 * time.Second}, {"0", 0}, {"30", 30 * time.Second}, {"x", 120 * time.Second}} {
		if got := typ.CacheTimeout(resolver.Config{"CACHE_TIMEOUT": tc.v}); got != tc.want {
			t.Errorf("CacheTimeout(%q) = %s, want %s", tc.v, got, tc.want)
		}
	}
	for cfg, want := range map[string]bool{"True": true, "1": true, "False": false, "": false} {
		if got := typ.Editable(resolver.Config{"EDITABLE": cfg}); got != want {
			t.Errorf("Editable(EDITABLE=%q) = %v", cfg, got)
		}
	}
	if !typ.Editable(resolver.Config{"Editable": "true"}) {
		t.Error("Editable ignores the key Editable")
	}
}

func TestValidate(t *testing.T) {
	good := resolver.Config{
		"LDAPURI": "ldap://127.0.0.1:389, ldaps://[::1]:636,ldap.example.org", "LDAPBASE": "dc=example,dc=org",
		"BINDDN": "cn=svc,dc=example,dc=org", "BINDPW": "top-Secret-9", "LOGINNAMEATTRIBUTE": "uid, mail",
		"USERINFO": `{"givenname":"givenName","password":"userPassword"}`, "UIDTYPE": "objectGUID",
		"MULTIVALUEATTRIBUTES": `["mobile"]`, "TIMEOUT": "2.5", "SIZELIMIT": "20", "CACHE_TIMEOUT": "0",
		"SCOPE": "LEVEL", "TLS_VERSION": "5", "TLS_VERIFY": "False", "NOREFERRALS": "True", "NOSCHEMAS": "1",
		"LDAPFILTER": "(anything", "EDITABLE": "1", "DN_TEMPLATE": "cn=<givenname> <surname>,<basedn>",
		"OBJECT_CLASSES": "top, inetOrgPerson", "SERVERPOOL_STRATEGY": "FIRST", "SERVERPOOL_SKIP": "10",
	}
	if err := ldapresolver.Validate(good); err != nil {
		t.Fatalf("Validate(good): %v", err)
	}
	with := func(kv ...string) resolver.Config {
		c := resolver.Config{}
		for k, v := range good {
			c[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			c[kv[i]] = kv[i+1]
		}
		return c
	}
	for _, ok := range []resolver.Config{
		with("AUTHTYPE", "Anonymous", "BINDPW", ""),
		with("BINDDN", "", "BINDPW", ""),
		with("LDAPSEARCHFILTER", "objectClass=person"),
		with("MULTIVALUEATTRIBUTES", "mobile, phone"),
		with("LOGINNAMEATTRIBUTE", "", "USERINFO", `{"username":"sAMAccountName"}`),
		with("UIDTYPE", "dn"),
		with("TLS_VERSION", "2"),
	} {
		if err := ldapresolver.Validate(ok); err != nil {
			t.Errorf("Validate: %v", err)
		}
	}
	cases := []struct {
		name string
		cfg  resolver.Config
		want string
	}{
		{"no LDAPURI", with("LDAPURI", ""), "LDAPURI is missing"},
		{"only commas", with("LDAPURI", " , "), "LDAPURI is missing"},
		{"bad scheme", with("LDAPURI", "http://h"), "scheme"},
		{"ldapi", with("LDAPURI", "ldapi:///run/slapd"), "scheme"},
		{"path", with("LDAPURI", "ldap://h/dc=x??sub"), "only scheme"},
		{"user info", with("LDAPURI", "ldap://u:p@h"), "only scheme"},
		{"bad port", with("LDAPURI", "ldap://h:99999"), "port"},
		{"no LDAPBASE", with("LDAPBASE", ""), "LDAPBASE is missing"},
		{"bad LDAPBASE", with("LDAPBASE", "not a dn"), "LDAPBASE"},
		{"NTLM", with("AUTHTYPE", "NTLM"), "not supported"},
		{"Digest", with("AUTHTYPE", "SASL Digest-MD5"), "not supported"},
		{"Kerberos", with("AUTHTYPE", "SASL Kerberos"), "not supported"},
		{"unknown AUTHTYPE", with("AUTHTYPE", "Magic"), "unknown"},
		{"no BINDPW", with("BINDPW", ""), "BINDPW"},
		{"TIMEOUT word", with("TIMEOUT", "five"), "TIMEOUT"},
		{"TIMEOUT zero", with("TIMEOUT", "0"), "TIMEOUT"},
		{"TIMEOUT negative", with("TIMEOUT", "-1"), "TIMEOUT"},
		{"TIMEOUT NaN", with("TIMEOUT", "NaN"), "TIMEOUT"},
		{"TIMEOUT huge", with("TIMEOUT", "1e9"), "TIMEOUT"},
		{"CACHE_TIMEOUT", with("CACHE_TIMEOUT", "-5"), "CACHE_TIMEOUT"},
		{"SIZELIMIT", with("SIZELIMIT", "many"), "SIZELIMIT"},
		{"USERINFO JSON", with("USERINFO", `{"givenname":`), "USERINFO"},
		{"USERINFO list", with("USERINFO", `["uid"]`), "USERINFO"},
		{"USERINFO attr", with("USERINFO", `{"givenname":"given)(name"}`), "USERINFO"},
		{"login attr", with("LOGINNAMEATTRIBUTE", "uid=*"), "LOGINNAMEATTRIBUTE"},
		{"no login attr", with("LOGINNAMEATTRIBUTE", ""), "LOGINNAMEATTRIBUTE is missing"},
		{"filter", with("LDAPSEARCHFILTER", "(uid=*"), "LDAPSEARCHFILTER"},
		{"UIDTYPE", with("UIDTYPE", "entry UUID"), "UIDTYPE"},
		{"MULTIVALUE", with("MULTIVALUEATTRIBUTES", `["mobile"`), "MULTIVALUEATTRIBUTES"},
		{"SCOPE", with("SCOPE", "everything"), "SCOPE"},
		{"TLS_VERIFY", with("TLS_VERIFY", "perhaps"), "TLS_VERIFY"},
		{"TLS_VERSION", with("TLS_VERSION", "1.3"), "TLS_VERSION"},
		{"CACERTIFICATE", with("CACERTIFICATE", "not pem"), "CACERTIFICATE"},
		{"OBJECT_CLASSES", with("OBJECT_CLASSES", "top,in etOrgPerson"), "OBJECT_CLASSES"},
		{"DN_TEMPLATE", with("DN_TEMPLATE", "<username>"), "DN_TEMPLATE"},
		{"strategy", with("SERVERPOOL_STRATEGY", "BEST"), "SERVERPOOL_STRATEGY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ldapresolver.Validate(tc.cfg)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, resolver.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v; want ErrConfig with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), good["BINDPW"]) {
				t.Errorf("the error shows the bind password: %v", err)
			}
			if _, err := ldapresolver.New(t.Context(), tc.cfg, resolver.Env{Log: zerolog.Nop()}); err == nil {
				t.Error("New accepted it")
			}
		})
	}
	t.Run("TLS_CA_FILE", func(t *testing.T) {
		// The file is read at New, not at Validate (which may run on
		// another node).
		cfg := with("TLS_VERIFY", "True", "TLS_CA_FILE", t.TempDir()+"/missing.pem", "LDAPURI", "ldaps://h")
		if err := ldapresolver.Validate(cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := ldapresolver.New(t.Context(), cfg, resolver.Env{}); !errors.Is(err, resolver.ErrConfig) {
			t.Errorf("New with a missing CA file: %v", err)
		}
	})
	t.Run("String", func(t *testing.T) {
		r, err := ldapresolver.New(t.Context(), good, resolver.Env{})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
			if strings.Contains(strings.ReplaceAll(fmt.Sprintf(f, r), " ", ""), good["BINDPW"]) {
				t.Errorf("%s shows the bind password", f)
			}
		}
	})
}

// TestBehaviour covers configuration features beyond the kit.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	s := directory(t)
	ctx := t.Context()
	aliceDN := "uid=alice," + peopleDN

	t.Run("InjectionLogins", func(t *testing.T) {
		r := open(t, config(s, "LOGINNAMEATTRIBUTE", "uid,mail"))
		for _, login := range []string{"*", ")(uid=*", "alice)(uid=*", "*)(|(objectClass=*", "alice*", "(uid=alice)", `alice\`, " alice", "alice "} {
			if uid, err := r.UserID(ctx, login); !errors.Is(err, resolver.ErrNoUser) {
				t.Errorf("UserID(%q) = %q, %v", login, uid, err)
			}
			if ok, err := r.CheckPassword(ctx, login, password("alice")); ok || err != nil {
				t.Errorf("CheckPassword(uid %q) = %v, %v", login, ok, err)
			}
		}
		for _, v := range []string{")(uid=*", "*)(uid=*", "a*)(|(uid=*"} {
			for _, key := range []string{"username", "email", "givenname"} {
				if list, err := r.Search(ctx, map[string]string{key: v}); err != nil || len(list) != 0 {
					t.Errorf("Search(%s=%q) = %v, %v", key, v, list, err)
				}
			}
		}
		// Case does not matter, as in the directory; the second login
		// attribute finds the same user.
		for _, login := range []string{"ALICE", "alice@example.org"} {
			if uid, err := r.UserID(ctx, login); err != nil || uid != aliceDN {
				t.Errorf("UserID(%q) = %q, %v", login, uid, err)
			}
		}
		if list, err := r.Search(ctx, map[string]string{"username": "ALI*"}); err != nil || len(list) != 1 {
			t.Errorf("Search(ALI*) = %v, %v", list, err)
		}
	})
	t.Run("OutsideBase", func(t *testing.T) {
		r := open(t, config(s))
		for _, uid := range []string{"uid=eve,ou=other,dc=example,dc=org", "cn=svc,dc=example,dc=org", "dc=example,dc=org", "uid=device1," + peopleDN} {
			if _, err := r.User(ctx, uid); !errors.Is(err, resolver.ErrNoUser) {
				t.Errorf("User(%q): %v", uid, err)
			}
			if ok, err := r.CheckPassword(ctx, uid, "eve-Pw"); ok || err != nil {
				t.Errorf("CheckPassword(%q) = %v, %v", uid, ok, err)
			}
		}
		if _, err := r.UserID(ctx, "device1"); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("an entry outside LDAPSEARCHFILTER was found: %v", err)
		}
	})
	t.Run("DNCase", func(t *testing.T) {
		// The uid is returned as given, even in another spelling.
		r := open(t, config(s))
		uid := "UID=Alice,OU=People,DC=example,DC=org"
		info, err := r.User(ctx, uid)
		if err != nil || info.String(resolver.KeyUserID) != uid || info.String(resolver.KeyUsername) != "alice" {
			t.Errorf("User(%q) = %v, %v", uid, info, err)
		}
	})
	t.Run("MultiValue", func(t *testing.T) {
		r := open(t, config(s))
		info, _ := r.User(ctx, aliceDN)
		if info["mobile"] != "+49170111" {
			t.Errorf("default mobile = %#v, want the first value as a string", info["mobile"])
		}
		r = open(t, config(s, "MULTIVALUEATTRIBUTES", `["mobile"]`))
		info, _ = r.User(ctx, aliceDN)
		if got, _ := info["mobile"].([]string); !slices.Equal(got, []string{"+49170111", "+49170999"}) {
			t.Errorf("multi-valued mobile = %#v", info["mobile"])
		}
		if _, ok := info["email"].(string); !ok {
			t.Errorf("email = %#v", info["email"])
		}
	})
	t.Run("SizeLimit", func(t *testing.T) {
		r := open(t, config(s, "SIZELIMIT", "2"))
		if list, err := r.Search(ctx, nil); err != nil || len(list) != 2 {
			t.Errorf("Search with SIZELIMIT 2 = %d users, %v", len(list), err)
		}
	})
	t.Run("Scope", func(t *testing.T) {
		r := open(t, config(s, "LDAPBASE", "dc=example,dc=org", "SCOPE", "LEVEL"))
		if list, err := r.Search(ctx, nil); err != nil || len(list) != 0 {
			t.Errorf("LEVEL search from the top = %v, %v", list, err)
		}
		if _, err := r.User(ctx, aliceDN); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("User outside the level: %v", err)
		}
		r = open(t, config(s, "LDAPBASE", "dc=example,dc=org"))
		if list, err := r.Search(ctx, nil); err != nil || len(list) != 5 {
			t.Errorf("SUBTREE search from the top = %d, %v", len(list), err)
		}
	})
	t.Run("uidNumber", func(t *testing.T) {
		r := open(t, config(s, "UIDTYPE", "uidNumber"))
		uid, err := r.UserID(ctx, "alice")
		if err != nil || uid != "1001" {
			t.Fatalf("UserID = %q, %v", uid, err)
		}
		for _, other := range []string{"01001", "+1001", "1001 ", "1*"} {
			if _, err := r.User(ctx, other); !errors.Is(err, resolver.ErrNoUser) {
				t.Errorf("User(%q): %v", other, err)
			}
		}
		if _, err := r.UserID(ctx, "bob"); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("a user without uidNumber: %v", err)
		}
		if v, desc := r.Test(ctx); v != true || !strings.Contains(desc, "found 4 user objects in") || !strings.Contains(desc, "but only 1 with the specified uidtype") {
			t.Errorf("Test = %v, %q", v, desc)
		}
	})
	t.Run("Fields", func(t *testing.T) {
		r := open(t, config(s))
		want := []string{"email", "givenname", "mobile", "phone", "surname", "username"}
		if got := r.Fields(); !slices.Equal(got, want) {
			t.Errorf("Fields = %v", got)
		}
		if _, err := r.Search(ctx, map[string]string{"password": "x"}); !errors.Is(err, resolver.ErrSearchKey) {
			t.Errorf("search by password: %v", err)
		}
	})
	t.Run("Anonymous", func(t *testing.T) {
		r := open(t, config(s, "AUTHTYPE", "Anonymous"))
		wantWorking(t, r)
	})
	t.Run("WrongBindPW", func(t *testing.T) {
		const pw = "wrong-Secret-0815"
		r := open(t, config(s, "BINDPW", pw))
		_, err := r.UserID(ctx, "alice")
		if !errors.Is(err, resolver.ErrUnavailable) || strings.Contains(err.Error(), pw) {
			t.Errorf("UserID with a wrong BINDPW: %v", err)
		}
		v, desc := r.Test(ctx)
		if v != false || !strings.Contains(desc, "Invalid Credentials") || strings.Contains(desc, pw) {
			t.Errorf("Test = %v, %q", v, desc)
		}
	})
	t.Run("TestOK", func(t *testing.T) {
		r := open(t, config(s))
		if v, desc := r.Test(ctx); v != true || !strings.HasPrefix(desc, "Your LDAP config seems to be OK, 4 user objects found in ") {
			t.Errorf("Test = %v, %q", v, desc)
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		r := open(t, config(s))
		if r.Editable() {
			t.Fatal("Editable")
		}
		if err := r.Update(ctx, aliceDN, map[string]string{"surname": "x"}); !errors.Is(err, resolver.ErrNotEditable) {
			t.Errorf("Update: %v", err)
		}
		if err := r.Delete(ctx, aliceDN); !errors.Is(err, resolver.ErrNotEditable) {
			t.Errorf("Delete: %v", err)
		}
	})
	t.Run("Create", func(t *testing.T) {
		r := open(t, editableConfig(s))
		// DN special characters in the login are escaped, not parsed.
		login := `x,uid=admin+cn=y\ "q" <z>;#`
		uid, err := r.Create(ctx, map[string]string{"username": login, "password": "Pw-1", "mobile": "+1"})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		t.Cleanup(func() { _ = r.Delete(t.Context(), uid) })
		if got, err := r.UserID(ctx, login); err != nil || got != uid {
			t.Errorf("UserID(%q) = %q, %v; want %q", login, got, err, uid)
		}
		info, err := r.User(ctx, uid)
		if err != nil || info.String("username") != login || info.String("surname") != login {
			t.Errorf("User = %v, %v", info, err)
		}
		if ok, _ := r.CheckPassword(ctx, uid, "Pw-1"); !ok {
			t.Error("password does not verify")
		}
		if _, err := r.Create(ctx, map[string]string{"username": login}); err == nil || !strings.Contains(err.Error(), "Already Exists") {
			t.Errorf("second Create: %v", err)
		}
		if _, err := r.Create(ctx, map[string]string{"username": "n", "shoesize": "44"}); err == nil {
			t.Error("Create with an unknown field")
		}
		if _, err := r.Create(ctx, map[string]string{"givenname": "n"}); err == nil {
			t.Error("Create without username")
		}
		if err := r.Update(ctx, "uid=nobody,"+peopleDN, map[string]string{"surname": "x"}); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("Update of nobody: %v", err)
		}
		if err := r.Delete(ctx, "uid=nobody,"+peopleDN); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("Delete of nobody: %v", err)
		}
		// An empty value deletes the attribute.
		if err := r.Update(ctx, uid, map[string]string{"mobile": ""}); err != nil {
			t.Fatal(err)
		}
		if info, _ := r.User(ctx, uid); info["mobile"] != nil {
			t.Errorf("mobile after deleting it: %#v", info["mobile"])
		}
		r2 := open(t, editableConfig(s, "DN_TEMPLATE", ""))
		if _, err := r2.Create(ctx, map[string]string{"username": "n"}); !errors.Is(err, resolver.ErrConfig) {
			t.Errorf("Create without DN_TEMPLATE: %v", err)
		}
		r3 := open(t, editableConfig(s, "DN_TEMPLATE", "uid=<username>,ou=other,dc=example,dc=org"))
		if _, err := r3.Create(ctx, map[string]string{"username": "n"}); !errors.Is(err, resolver.ErrConfig) {
			t.Errorf("Create outside the base: %v", err)
		}
	})
}
