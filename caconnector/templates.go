package caconnector

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
)

// Template is a certificate template of a local CA: privacyIDEA's
// combination of validity days and an extension set.
//
// The templates file is the YAML of privacyIDEA's local CA, restricted to
// a mapping of template names to flat fields:
//
//	# comment
//	user:
//	    days: 365
//	    extensions: "user"
//	webserver:
//	    days: 750
//	    extensions: server
//	    ext_key_usage: serverAuth, clientAuth
//
// Fields: days (1 to 36500), extensions (one of the extension sets of
// privacyIDEA's openssl.cnf, which we build ourselves: server, user,
// etoken, ocsp, usr_cert, plus client), and optionally key_usage
// (digitalSignature, nonRepudiation, keyEncipherment, dataEncipherment,
// keyAgreement) and ext_key_usage (serverAuth, clientAuth,
// emailProtection, codeSigning, OCSPSigning, timeStamping), comma
// separated, which replace those of the extension set.
type Template struct {
	Days        int
	Extensions  string
	KeyUsage    []string
	ExtKeyUsage []string
}

// extensionSets are the extension sets by name: key usage and extended
// key usage (privacyIDEA's openssl.cnf sections).
var extensionSets = map[string]struct {
	ku  []string
	eku []string
}{
	"server":   {[]string{"digitalSignature", "keyEncipherment"}, []string{"serverAuth"}},
	"client":   {[]string{"digitalSignature", "keyEncipherment"}, []string{"clientAuth"}},
	"user":     {[]string{"nonRepudiation", "digitalSignature", "keyEncipherment"}, nil},
	"etoken":   {[]string{"nonRepudiation", "digitalSignature", "keyEncipherment"}, nil},
	"ocsp":     {[]string{"digitalSignature", "keyEncipherment"}, []string{"OCSPSigning"}},
	"usr_cert": {nil, nil},
}

var keyUsages = map[string]x509.KeyUsage{
	"digitalSignature": x509.KeyUsageDigitalSignature,
	"nonRepudiation":   x509.KeyUsageContentCommitment,
	"keyEncipherment":  x509.KeyUsageKeyEncipherment,
	"dataEncipherment": x509.KeyUsageDataEncipherment,
	"keyAgreement":     x509.KeyUsageKeyAgreement,
}

var extKeyUsages = map[string]x509.ExtKeyUsage{
	"serverAuth":      x509.ExtKeyUsageServerAuth,
	"clientAuth":      x509.ExtKeyUsageClientAuth,
	"emailProtection": x509.ExtKeyUsageEmailProtection,
	"codeSigning":     x509.ExtKeyUsageCodeSigning,
	"OCSPSigning":     x509.ExtKeyUsageOCSPSigning,
	"timeStamping":    x509.ExtKeyUsageTimeStamping,
}

// apply sets the template's extensions on cert.
func (t Template) apply(cert *x509.Certificate) {
	set := extensionSets[t.Extensions]
	ku, eku := set.ku, set.eku
	if t.KeyUsage != nil {
		ku = t.KeyUsage
	}
	if t.ExtKeyUsage != nil {
		eku = t.ExtKeyUsage
	}
	for _, n := range ku {
		cert.KeyUsage |= keyUsages[n]
	}
	for _, n := range eku {
		cert.ExtKeyUsage = append(cert.ExtKeyUsage, extKeyUsages[n])
	}
}

// JSON is the template as GET /caconnector/ shows it.
func (t Template) JSON() map[string]any {
	m := map[string]any{"days": t.Days, "extensions": t.Extensions}
	if t.KeyUsage != nil {
		m["key_usage"] = strings.Join(t.KeyUsage, ", ")
	}
	if t.ExtKeyUsage != nil {
		m["ext_key_usage"] = strings.Join(t.ExtKeyUsage, ", ")
	}
	return m
}

// readTemplates reads a templates file through the confinement.
func (s *Service) readTemplates(path string) (map[string]Template, error) {
	b, err := s.cfg.Files.ReadFile(path, maxFile)
	if err != nil {
		return nil, caErr("The templates file %s cannot be used: %s", path, fileroot.Describe(err, path))
	}
	t, err := ParseTemplates(string(b))
	if err != nil {
		return nil, apierr.Newf(apierr.CA, "The templates file %s is invalid: %v", path, err)
	}
	return t, nil
}

// ParseTemplates reads the templates file format (see Template).
func ParseTemplates(src string) (map[string]Template, error) {
	out := map[string]Template{}
	cur := ""
	for i, line := range strings.Split(src, "\n") {
		n := i + 1
		line = strings.TrimRight(line, " \t\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		indented := line[0] == ' ' || line[0] == '\t'
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			return nil, fmt.Errorf("line %d: expected \"name:\" or \"field: value\"", n)
		}
		k, v = strings.TrimSpace(k), unquote(stripComment(strings.TrimSpace(v)))
		if !indented {
			if v != "" || k == "" {
				return nil, fmt.Errorf("line %d: a template starts with its name and a colon alone", n)
			}
			if _, dup := out[k]; dup {
				return nil, fmt.Errorf("line %d: template %s is defined twice", n, k)
			}
			cur = k
			out[cur] = Template{}
			continue
		}
		if cur == "" {
			return nil, fmt.Errorf("line %d: field outside a template", n)
		}
		t := out[cur]
		switch k {
		case "days":
			d, err := strconv.Atoi(v)
			if err != nil || d < 1 || d > 36500 {
				return nil, fmt.Errorf("line %d: days must be a whole number from 1 to 36500", n)
			}
			t.Days = d
		case "extensions":
			if _, ok := extensionSets[v]; !ok {
				return nil, fmt.Errorf("line %d: unknown extensions %q (known: client, etoken, ocsp, server, user, usr_cert)", n, v)
			}
			t.Extensions = v
		case "key_usage":
			l, err := names(v, keyUsages)
			if err != nil {
				return nil, fmt.Errorf("line %d: key_usage: %v", n, err)
			}
			t.KeyUsage = l
		case "ext_key_usage":
			l, err := names(v, extKeyUsages)
			if err != nil {
				return nil, fmt.Errorf("line %d: ext_key_usage: %v", n, err)
			}
			t.ExtKeyUsage = l
		default:
			return nil, fmt.Errorf("line %d: unknown field %q", n, k)
		}
		out[cur] = t
	}
	for name, t := range out {
		if t.Days == 0 {
			t.Days = DefaultCertDays
		}
		if t.Extensions == "" {
			t.Extensions = "server"
		}
		out[name] = t
	}
	return out, nil
}

// stripComment drops a YAML comment after a value ("365  # a year"); a
// quoted value keeps its text.
func stripComment(v string) string {
	if strings.HasPrefix(v, "#") {
		return ""
	}
	if v != "" && (v[0] == '"' || v[0] == '\'') {
		if end := strings.IndexByte(v[1:], v[0]); end >= 0 {
			return v[:end+2]
		}
		return v
	}
	if i := strings.Index(v, " #"); i >= 0 {
		return strings.TrimSpace(v[:i])
	}
	return v
}

func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
		return v[1 : len(v)-1]
	}
	return v
}

func names[T any](v string, known map[string]T) ([]string, error) {
	out := []string{}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if _, ok := known[f]; !ok {
			var all []string
			for k := range known {
				all = append(all, k)
			}
			slices.Sort(all)
			return nil, fmt.Errorf("unknown name %q (known: %s)", f, strings.Join(all, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}
