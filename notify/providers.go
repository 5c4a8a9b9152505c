package notify

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
)

// The SMS provider modules, under privacyIDEA's module paths.
const (
	ModuleHTTP     = "privacyidea.lib.smsprovider.HttpSMSProvider.HttpSMSProvider"
	ModuleSMTP     = "privacyidea.lib.smsprovider.SmtpSMSProvider.SmtpSMSProvider"
	ModuleScript   = "privacyidea.lib.smsprovider.ScriptSMSProvider.ScriptSMSProvider"
	ModuleSipgate  = "privacyidea.lib.smsprovider.SipgateSMSProvider.SipgateSMSProvider"
	ModuleSMPP     = "privacyidea.lib.smsprovider.SmppSMSProvider.SmppSMSProvider"
	ModuleFirebase = "privacyidea.lib.smsprovider.FirebaseProvider.FirebaseProvider"
)

// ProviderInfo describes an SMS provider module in privacyIDEA's
// parameters() shape.
type ProviderInfo struct {
	// OptionsAllowed: options beyond Parameters are used (as request
	// parameters of the HTTP provider).
	OptionsAllowed bool `json:"options_allowed"`
	// HeadersAllowed: the module sends the gateway's headers.
	HeadersAllowed bool `json:"headers_allowed"`
	// Parameters are the options the module knows, by key.
	Parameters map[string]ProviderParam `json:"parameters"`
}

// ProviderParam describes one option of a provider module.
type ProviderParam struct {
	Required    bool     `json:"required,omitempty"`
	Description string   `json:"description"`
	Values      []string `json:"values,omitempty"`
	Secret      bool     `json:"secret,omitempty"`
	Type        string   `json:"type,omitempty"`
}

var yesNo = []string{"yes", "no"}

// regexpParam is the REGEXP option every sending module knows.
var regexpParam = ProviderParam{Description: "Regular expression /pattern/replacement/ applied to the phone number, " +
	"for example /^0/0049/ or /[+ ]//."}

func providerTable() map[string]ProviderInfo {
	return map[string]ProviderInfo{
		ModuleHTTP: {OptionsAllowed: true, HeadersAllowed: true, Parameters: map[string]ProviderParam{
			"URL":               {Required: true, Description: "The base URL of the HTTP gateway."},
			"HTTP_METHOD":       {Required: true, Description: "GET sends the parameters in the query, POST in the body.", Values: []string{"GET", "POST"}},
			"RETURN_SUCCESS":    {Description: "The answer must contain this text to count as success."},
			"RETURN_FAIL":       {Description: "An answer containing this text counts as failure."},
			"USERNAME":          {Description: "The user name for HTTP basic authentication."},
			"PASSWORD":          {Description: "The password for HTTP basic authentication.", Secret: true},
			"CHECK_SSL":         {Required: true, Description: "Verify the TLS certificate of the gateway (default yes).", Values: yesNo},
			"SEND_DATA_AS_JSON": {Required: true, Description: "Send the POST parameters as a JSON object (default no).", Values: yesNo},
			"REGEXP":            regexpParam,
			"PROXY":             {Description: "A proxy for HTTP and HTTPS (deprecated: use HTTP_PROXY and HTTPS_PROXY)."},
			"HTTP_PROXY":        {Description: "The proxy for http:// URLs."},
			"HTTPS_PROXY":       {Description: "The proxy for https:// URLs."},
			"TIMEOUT":           {Description: "Seconds to wait for the gateway's answer (default 3, at most 60)."},
		}},
		ModuleSMTP: {Parameters: map[string]ProviderParam{
			"MAILTO":         {Required: true, Description: "The recipient of the e-mail; {phone} is replaced by the phone number."},
			"SMTPIDENTIFIER": {Required: true, Description: "The SMTP server definition to send through."},
			"SUBJECT":        {Description: "The subject; {phone} and {otp} are replaced (default {phone})."},
			"BODY":           {Description: "The body; {phone} and {otp} are replaced (default {otp}).", Type: "text"},
			"REGEXP":         regexpParam,
		}},
		ModuleScript: {Parameters: map[string]ProviderParam{
			"script": {Required: true, Description: "The program in the server's script directory. " +
				"It is run without a shell, with the phone number and the message as its two arguments."},
			"background": {Required: true, Description: "Wait for the program to finish (wait), or let it run in the background.",
				Values: []string{"wait", "background"}},
			"REGEXP":  regexpParam,
			"TIMEOUT": {Description: "Seconds the program may run before it is killed (default 10, at most 60)."},
		}},
		ModuleSipgate: {Parameters: map[string]ProviderParam{
			"USERNAME": {Required: true, Description: "The sipgate user name (not supported by authsrv: sending fails)."},
			"PASSWORD": {Required: true, Description: "The sipgate password.", Secret: true},
			"PROXY":    {Description: "A proxy."},
			"REGEXP":   regexpParam,
		}},
		ModuleSMPP: {Parameters: map[string]ProviderParam{
			"SMSC_HOST":  {Required: true, Description: "The SMSC host (not supported by authsrv: sending fails)."},
			"SMSC_PORT":  {Required: true, Description: "The SMSC port."},
			"SYSTEM_ID":  {Required: true, Description: "The SMPP system id."},
			"PASSWORD":   {Required: true, Description: "The SMPP password.", Secret: true},
			"S_ADDR_TON": {Description: "The source address TON."},
			"S_ADDR_NPI": {Description: "The source address NPI."},
			"S_ADDR":     {Description: "The source address."},
			"D_ADDR_TON": {Description: "The destination address TON."},
			"D_ADDR_NPI": {Description: "The destination address NPI."},
			"REGEXP":     regexpParam,
		}},
		ModuleFirebase: {Parameters: map[string]ProviderParam{
			"JSON config file": {Required: true, Description: "The Firebase service account file (not supported by authsrv: sending fails)."},
			"httpsproxy":       {Description: "A proxy for HTTPS."},
		}},
	}
}

// providers is built once; Providers hands out copies.
var providers = providerTable()

// Providers describes every SMS provider module by its privacyIDEA module
// path. Sipgate, SMPP and Firebase are listed so that their definitions
// can be stored, but sending through them fails ("not supported").
func Providers() map[string]ProviderInfo {
	out := make(map[string]ProviderInfo, len(providers))
	for k, v := range providers {
		v.Parameters = maps.Clone(v.Parameters)
		for pk, p := range v.Parameters {
			p.Values = slices.Clone(p.Values)
			v.Parameters[pk] = p
		}
		out[k] = v
	}
	return out
}

// supported reports whether authsrv can send through a module.
func supported(module string) bool {
	return module == ModuleHTTP || module == ModuleSMTP || module == ModuleScript
}

// shortModule is the class name of a module path, for messages.
func shortModule(module string) string {
	return module[strings.LastIndex(module, ".")+1:]
}

// optionView is a gateway's options during validation.
type optionView map[string]string

// has reports whether an option is set (a kept [Censored] value counts).
func (o optionView) has(k string) bool { return strings.TrimSpace(o[k]) != "" }

// validateOptions checks a gateway's options for module. Values equal to
// Censored were validated when they were stored and are only counted as
// present.
func (s *Service) validateOptions(module string, opts optionView) error {
	info, ok := providers[module]
	if !ok {
		return paramErr("Unknown SMS provider module: %s", module)
	}
	for k, p := range info.Parameters {
		if !p.Required || opts.has(k) {
			continue
		}
		// These have privacyIDEA's defaults when absent.
		if (module == ModuleHTTP && (k == "CHECK_SSL" || k == "SEND_DATA_AS_JSON")) || (module == ModuleScript && k == "background") {
			continue
		}
		return apierr.MissingParameter(k)
	}
	for k, p := range info.Parameters {
		v, set := opts[k]
		if !set || v == Censored || p.Values == nil || v == "" {
			continue
		}
		if !slices.ContainsFunc(p.Values, func(a string) bool { return strings.EqualFold(a, v) }) {
			return paramErr("The option %s must be one of %s.", k, strings.Join(p.Values, ", "))
		}
	}
	if v := opts["REGEXP"]; v != "" && v != Censored {
		if _, _, err := parseRegexp(v); err != nil {
			return err
		}
	}
	if v := opts["TIMEOUT"]; v != "" && v != Censored && (module == ModuleHTTP || module == ModuleScript) {
		if _, err := parseTimeout(v, 0); err != nil {
			return err
		}
	}
	switch module {
	case ModuleHTTP:
		if v := opts["URL"]; v != Censored {
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return paramErr("The option URL must be an http:// or https:// URL.")
			}
		}
		for _, k := range []string{"PROXY", "HTTP_PROXY", "HTTPS_PROXY"} {
			if v := opts[k]; v != "" && v != Censored {
				if _, err := parseProxy(v); err != nil {
					return err
				}
			}
		}
	case ModuleScript:
		if s.scripts == "" {
			return ErrScriptsDisabled
		}
		if v := opts["script"]; v != Censored {
			if _, err := s.scriptPath(v, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseTimeout reads a timeout option in seconds (a decimal number above
// 0 and at most 60); "" gives def.
func parseTimeout(v string, def float64) (float64, error) {
	if strings.TrimSpace(v) == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f <= 0 || f > 60 {
		return 0, paramErr("The option TIMEOUT must be a number of seconds above 0 and at most 60.")
	}
	return f, nil
}

// parseProxy reads a proxy URL; a bare host:port means http://host:port.
func parseProxy(v string) (*url.URL, error) {
	if !strings.Contains(v, "://") {
		v = "http://" + v
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5") {
		return nil, paramErr("A proxy must be an http://, https:// or socks5:// URL.")
	}
	return u, nil
}

// parseRegexp reads privacyIDEA's "/pattern/replacement/" form: the
// replacement is the part after the last inner slash, so the pattern may
// contain slashes. Python's \1 and \g<name> references become Go's.
func parseRegexp(v string) (*regexp.Regexp, string, error) {
	bad := paramErr("The option REGEXP must have the form /pattern/replacement/ with a valid pattern.")
	if len(v) < 3 || v[0] != '/' || v[len(v)-1] != '/' {
		return nil, "", bad
	}
	inner := v[1 : len(v)-1]
	i := strings.LastIndex(inner, "/")
	if i < 0 {
		return nil, "", bad
	}
	re, err := regexp.Compile(inner[:i])
	if err != nil {
		return nil, "", bad
	}
	return re, pythonRepl(inner[i+1:]), nil
}

// pythonRepl converts a Python re.sub replacement to Go's Expand syntax.
func pythonRepl(r string) string {
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == '$':
			b.WriteString("$$")
		case c == '\\' && i+1 < len(r) && r[i+1] >= '0' && r[i+1] <= '9':
			j := i + 1
			for j < len(r) && j < i+3 && r[j] >= '0' && r[j] <= '9' {
				j++
			}
			fmt.Fprintf(&b, "${%s}", r[i+1:j])
			i = j - 1
		case c == '\\' && strings.HasPrefix(r[i+1:], "g<"):
			end := strings.IndexByte(r[i:], '>')
			if end < 0 {
				b.WriteByte(c)
				continue
			}
			fmt.Fprintf(&b, "${%s}", r[i+3:i+end])
			i += end
		case c == '\\' && i+1 < len(r) && r[i+1] == '\\':
			b.WriteByte('\\')
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// mangle applies the REGEXP option to a phone number.
func mangle(phone, rx string) string {
	if rx == "" {
		return phone
	}
	re, repl, err := parseRegexp(rx)
	if err != nil {
		return phone
	}
	return re.ReplaceAllString(phone, repl)
}

// replaceTags substitutes {otp} and {phone} in one pass by plain
// replacement: no template engine sees admin text mixed with user data,
// and a phone number containing "{otp}" is not expanded again.
func replaceTags(s, phone, text string) string {
	return strings.NewReplacer("{otp}", text, "{phone}", phone).Replace(s)
}
