package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver"
)

// The LDAP machine resolver's own parameters; the connection parameters
// are those of the LDAP user store (admin-config 3.2).
const (
	paramHostnameAttr = "HOSTNAMEATTRIBUTE"
	paramIDAttr       = "IDATTRIBUTE"
	paramIPAttr       = "IPATTRIBUTE"
	paramSearchFilter = "SEARCHFILTER"
	paramBindPW       = "BINDPW"

	defaultSearchFilter = "(objectClass=computer)"

	// ldapUserType is the user store type whose connection code the LDAP
	// machine resolver uses.
	ldapUserType = "ldapresolver"
)

// ldapPassThrough are the LDAP user store parameters the machine resolver
// hands on unchanged.
var ldapPassThrough = []string{
	"LDAPURI", "LDAPBASE", "BINDDN", paramBindPW, "AUTHTYPE", "TIMEOUT", "SIZELIMIT", "SCOPE",
	"NOREFERRALS", "START_TLS", "TLS_VERIFY", "TLS_CA_FILE", "CACERTIFICATE", "TLS_VERSION",
	"SERVERPOOL_STRATEGY", "SERVERPOOL_SKIP",
}

// Keys of the user store's USERINFO that carry the machine's attributes.
const (
	infoHostnames = "hostnames"
	infoIP        = "ip"
	infoID        = "machineid"
)

var attrNameRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*|[0-9]+(\.[0-9]+)+)(;[A-Za-z0-9-]+)*$`)

// ldapKind is the ldap machine resolver type on the LDAP user store type
// dir.
func ldapKind(dir resolver.Type) kind {
	params := append([]string{paramHostnameAttr, paramIDAttr, paramIPAttr, paramSearchFilter, "EDITABLE"}, ldapPassThrough...)
	return kind{
		params:    params,
		passwords: []string{paramBindPW},
		validate: func(r *Resolvers, cfg map[string]string) error {
			_, err := ldapValidate(dir, cfg)
			return err
		},
		build: func(ctx context.Context, r *Resolvers, name string, cfg map[string]string) (backend, error) {
			return r.buildLDAP(ctx, dir, name, cfg)
		},
		test: func(ctx context.Context, r *Resolvers, cfg map[string]string) (bool, string) {
			if _, err := ldapValidate(dir, cfg); err != nil {
				return false, err.Error()
			}
			b, err := r.buildLDAP(ctx, dir, "test", cfg)
			if err != nil {
				return false, err.Error()
			}
			defer b.close()
			ms, err := b.machines(ctx, MachineFilter{})
			if err != nil {
				if ref, ok := netguard.Refusal(err); ok {
					return false, "LDAP connection failed: " + ref.Error()
				}
				if cause := errors.Unwrap(err); cause != nil {
					err = cause
				}
				msg := strings.NewReplacer("ldap search: ", "", resolver.ErrUnavailable.Error()+": ", "", "\n", "; ").Replace(err.Error())
				return false, "LDAP connection or search failed: " + truncate(msg, 300)
			}
			return true, fmt.Sprintf("Your LDAP config seems to be OK, %d machine objects found.", len(ms))
		},
	}
}

// ldapUserConfig maps a machine resolver configuration onto the LDAP user
// store's: the hostname attribute is the login attribute, the id
// attribute the UIDTYPE (DN by default), SEARCHFILTER the
// LDAPSEARCHFILTER, and USERINFO maps the hostnames (all values), the IP
// and the id.
func ldapUserConfig(cfg map[string]string) (resolver.Config, error) {
	get := func(k string) string { return strings.TrimSpace(cfg[k]) }
	bad := func(format string, args ...any) error {
		return apierr.New(apierr.Parameter, fmt.Sprintf(format, args...))
	}
	host := get(paramHostnameAttr)
	if host == "" {
		return nil, apierr.MissingParameter(paramHostnameAttr)
	}
	if !attrNameRE.MatchString(host) {
		return nil, bad("%s %q is not an attribute name.", paramHostnameAttr, host)
	}
	id := get(paramIDAttr)
	if id == "" {
		id = "DN"
	}
	if !strings.EqualFold(id, "DN") && !attrNameRE.MatchString(id) {
		return nil, bad("%s %q is neither DN nor an attribute name.", paramIDAttr, id)
	}
	ip := get(paramIPAttr)
	if ip != "" && !attrNameRE.MatchString(ip) {
		return nil, bad("%s %q is not an attribute name.", paramIPAttr, ip)
	}
	sf := get(paramSearchFilter)
	if sf == "" {
		sf = defaultSearchFilter
	} else if !strings.HasPrefix(sf, "(") {
		sf = "(" + sf + ")"
	}
	out := resolver.Config{}
	for _, k := range ldapPassThrough {
		if v, ok := cfg[k]; ok {
			out[k] = v
		}
	}
	info := map[string]string{infoHostnames: host}
	if ip != "" {
		info[infoIP] = ip
	}
	if !strings.EqualFold(id, "DN") {
		info[infoID] = id
	}
	ui, _ := json.Marshal(info)
	out["LOGINNAMEATTRIBUTE"] = host
	out["UIDTYPE"] = id
	out["LDAPSEARCHFILTER"] = sf
	out["USERINFO"] = string(ui)
	out["MULTIVALUEATTRIBUTES"] = `["` + infoHostnames + `"]`
	return out, nil
}

// ldapMachines is a machine resolver on an LDAP directory, through the
// LDAP user store's connection code (server pool, TLS, dial policy, time
// budget).
type ldapMachines struct {
	name   string
	dir    resolver.Resolver
	idIsDN bool
	hasIP  bool
}

var _ backend = (*ldapMachines)(nil)

// userKeys renames the user store's parameters in its error texts to the
// machine resolver's.
var userKeys = strings.NewReplacer("LDAPSEARCHFILTER", paramSearchFilter, "LOGINNAMEATTRIBUTE", paramHostnameAttr,
	"UIDTYPE", paramIDAttr)

// ldapValidate maps cfg onto the user store's configuration and checks it
// with the user store type t.
func ldapValidate(t resolver.Type, cfg map[string]string) (resolver.Config, error) {
	ucfg, err := ldapUserConfig(cfg)
	if err != nil {
		return nil, err
	}
	if t.Validate != nil {
		if err := t.Validate(ucfg); err != nil {
			if ae, ok := errors.AsType[*apierr.Error](err); ok {
				return nil, apierr.New(ae.Code, userKeys.Replace(ae.Text)).Wrap(err)
			}
			return nil, err
		}
	}
	return ucfg, nil
}

func (r *Resolvers) buildLDAP(ctx context.Context, t resolver.Type, name string, cfg map[string]string) (*ldapMachines, error) {
	ucfg, err := ldapValidate(t, cfg)
	if err != nil {
		return nil, err
	}
	dir, err := t.New(ctx, ucfg, resolver.Env{Log: r.log.With().Str("machineresolver", name).Logger(), Dial: r.dial})
	if err != nil {
		return nil, err
	}
	return &ldapMachines{
		name: name, dir: dir,
		idIsDN: strings.EqualFold(ucfg["UIDTYPE"], "DN"),
		hasIP:  strings.TrimSpace(cfg[paramIPAttr]) != "",
	}, nil
}

// failed turns a directory error into one that names the machine
// resolver (the user store's text speaks of users).
func (l *ldapMachines) failed(err error) error {
	if errors.Is(err, resolver.ErrUnavailable) {
		return apierr.New(apierr.Resolver, fmt.Sprintf("The LDAP directory of the machine resolver %s is not available.", l.name)).Wrap(err)
	}
	return err
}

// machine converts a directory entry.
func (l *ldapMachines) machine(info resolver.Info) Machine {
	m := Machine{Resolver: l.name, Hostname: []string{}}
	m.ID, _ = info[resolver.KeyUserID].(string)
	switch h := info[infoHostnames].(type) {
	case []string:
		m.Hostname = append(m.Hostname, h...)
	case string:
		m.Hostname = append(m.Hostname, h)
	}
	if len(m.Hostname) == 0 {
		if u, ok := info[resolver.KeyUsername].(string); ok {
			m.Hostname = []string{u}
		}
	}
	if ip, ok := info[infoIP].(string); ok {
		ip = strings.TrimSpace(ip)
		if a, err := netip.ParseAddr(ip); err == nil {
			ip = a.String()
		}
		m.IP = ip
	}
	return m
}

func (l *ldapMachines) search(ctx context.Context, filter map[string]string) ([]Machine, error) {
	infos, err := l.dir.Search(ctx, filter)
	if err != nil {
		return nil, l.failed(err)
	}
	out := make([]Machine, 0, len(infos))
	for _, info := range infos {
		out = append(out, l.machine(info))
	}
	return out, nil
}

// machines asks the directory for the conditions it can decide (hostname,
// IP, a non-DN id); Resolvers.Machines checks every condition again.
func (l *ldapMachines) machines(ctx context.Context, f MachineFilter) ([]Machine, error) {
	filter := map[string]string{}
	if f.Hostname != "" {
		filter[resolver.KeyUsername] = "*" + f.Hostname + "*"
	}
	if a := f.ip(); a.IsValid() {
		if !l.hasIP {
			return nil, nil
		}
		filter[infoIP] = a.String()
	}
	if f.ID != "" && !l.idIsDN {
		filter[infoID] = "*" + f.ID + "*"
	}
	return l.search(ctx, filter)
}

func (l *ldapMachines) named(ctx context.Context, hostname string) ([]Machine, error) {
	if strings.Contains(hostname, "*") {
		return nil, nil // no hostname holds a star; it would be a wildcard
	}
	ms, err := l.search(ctx, map[string]string{resolver.KeyUsername: hostname})
	if err != nil {
		return nil, err
	}
	var out []Machine
	for _, m := range ms {
		for _, h := range m.Hostname {
			if strings.EqualFold(h, hostname) {
				out = append(out, m)
				break
			}
		}
	}
	return out, nil
}

func (l *ldapMachines) get(ctx context.Context, id string) (Machine, bool, error) {
	info, err := l.dir.User(ctx, id)
	if errors.Is(err, resolver.ErrNoUser) {
		return Machine{}, false, nil
	}
	if err != nil {
		return Machine{}, false, l.failed(err)
	}
	return l.machine(info), true, nil
}

func (l *ldapMachines) close() { _ = l.dir.Close() }
