package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// smsBucket holds one record per SMS gateway, keyed by its name (exact,
// case-sensitive); the integer id comes from the bucket's sequence.
const smsBucket = "smsgateways"

// Gateway is an SMS gateway definition. Reads return secret option and
// header values as [Censored] and list their keys in SecretOptions and
// SecretHeaders.
type Gateway struct {
	ID          int // set by the store; ignored by SetGateway
	Name        string
	Module      string // a module path from Providers
	Description string
	Options     map[string]string
	Headers     map[string]string
	// SecretOptions and SecretHeaders name the keys to seal. When both
	// are empty, keys containing PASSWORD, SECRET or TOKEN
	// (case-insensitive) are secret, and so are the Authorization and
	// Proxy-Authorization headers. Options a module marks secret are
	// always sealed, and so is a kept [Censored] value that was sealed.
	SecretOptions []string
	SecretHeaders []string
}

// String describes the gateway without its options.
func (g Gateway) String() string {
	return fmt.Sprintf("Gateway(%d %s %s)", g.ID, g.Name, shortModule(g.Module))
}

type gwValue struct {
	V      string `json:"v,omitempty"`
	Sealed []byte `json:"sealed,omitempty"`
}

type gatewayRecord struct {
	store.Versioned
	ID          int                `json:"id"`
	Name        string             `json:"name"`
	Module      string             `json:"module"`
	Description string             `json:"description,omitempty"`
	Options     map[string]gwValue `json:"options,omitempty"`
	Headers     map[string]gwValue `json:"headers,omitempty"`
	Rev         uint64             `json:"rev"`
}

const (
	kindOption = "option."
	kindHeader = "header."
)

// autoSecret is the rule for keys when no secret list is given.
func autoSecret(key string) bool {
	u := strings.ToUpper(key)
	return strings.Contains(u, "PASSWORD") || strings.Contains(u, "SECRET") || strings.Contains(u, "TOKEN")
}

func autoSecretHeader(key string) bool {
	return autoSecret(key) || strings.EqualFold(key, "Authorization") || strings.EqualFold(key, "Proxy-Authorization")
}

// validHeaderName reports whether k is an HTTP header field name (RFC
// 9110 token).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r > 127 || !(r == '!' || r == '#' || r == '$' || r == '%' || r == '&' || r == '\'' || r == '*' || r == '+' ||
			r == '-' || r == '.' || r == '^' || r == '_' || r == '`' || r == '|' || r == '~' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}

// SetGateway creates or replaces the SMS gateway g.Name and returns its
// id. The option and header sets replace the stored ones (absent keys are
// deleted); a value equal to [Censored] keeps the stored value. Each of
// also runs in the same transaction after the write.
func (s *Service) SetGateway(ctx context.Context, g Gateway, also ...func(store.Tx) error) (int, error) {
	if err := validIdentifier("SMS gateway", g.Name); err != nil {
		return 0, err
	}
	if g.Module == "" {
		return 0, apierr.MissingParameter("module")
	}
	info, ok := providers[g.Module]
	if !ok {
		return 0, paramErr("Unknown SMS provider module: %s", g.Module)
	}
	for k, v := range g.Options {
		if strings.TrimSpace(k) == "" || hasControl(k) {
			return 0, paramErr("Invalid option name %q.", k)
		}
		if strings.ContainsRune(v, 0) {
			return 0, paramErr("The option %s contains a NUL character.", k)
		}
	}
	for k, v := range g.Headers {
		if !validHeaderName(k) {
			return 0, paramErr("Invalid header name %q.", k)
		}
		if hasCRLF(v) || strings.ContainsRune(v, 0) {
			return 0, paramErr("The header %s contains a line break.", k)
		}
	}
	explicit := len(g.SecretOptions) > 0 || len(g.SecretHeaders) > 0
	secretOpt := func(k string) bool {
		if info.Parameters[k].Secret {
			return true
		}
		if explicit {
			return slices.Contains(g.SecretOptions, k)
		}
		return autoSecret(k)
	}
	secretHdr := func(k string) bool {
		if explicit {
			return slices.Contains(g.SecretHeaders, k)
		}
		return autoSecretHeader(k)
	}
	if err := s.validateOptions(g.Module, g.Options); err != nil {
		return 0, err
	}
	// Seal new secret values before the transaction.
	sealed := map[string][]byte{}
	for kind, m := range map[string]map[string]string{kindOption: g.Options, kindHeader: g.Headers} {
		for k, v := range m {
			isSecret := (kind == kindOption && secretOpt(k)) || (kind == kindHeader && secretHdr(k))
			if !isSecret || v == Censored || v == "" {
				continue
			}
			c, err := s.seal(v, smsBucket, g.Name, kind+k)
			if err != nil {
				return 0, err
			}
			sealed[kind+k] = c
		}
	}
	var id int
	err := s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(smsBucket)
		var old gatewayRecord
		switch err := store.GetJSON(b, []byte(g.Name), &old); {
		case errors.Is(err, store.ErrNotFound):
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			old = gatewayRecord{ID: int(seq)}
		case err != nil:
			return err
		}
		rec := gatewayRecord{ID: old.ID, Name: g.Name, Module: g.Module, Description: g.Description}
		build := func(kind string, in map[string]string, stored map[string]gwValue) (map[string]gwValue, error) {
			if len(in) == 0 {
				return nil, nil
			}
			out := make(map[string]gwValue, len(in))
			for k, v := range in {
				switch c, ok := sealed[kind+k]; {
				case v == Censored:
					sv, ok := stored[k]
					if !ok {
						return nil, paramErr("The %s %s is %s but has no stored value.", strings.TrimSuffix(kind, "."), k, Censored)
					}
					out[k] = sv
				case ok:
					out[k] = gwValue{Sealed: c}
				default:
					out[k] = gwValue{V: v}
				}
			}
			return out, nil
		}
		var err error
		if rec.Options, err = build(kindOption, g.Options, old.Options); err != nil {
			return err
		}
		if rec.Headers, err = build(kindHeader, g.Headers, old.Headers); err != nil {
			return err
		}
		if g.Module == ModuleSMTP {
			if smtpID := g.Options["SMTPIDENTIFIER"]; smtpID != Censored {
				if _, err := smtpRecordOf(tx, smtpID); err != nil {
					if errors.Is(err, ErrSMTPNotFound) {
						return paramErr("The SMTP server %s given as SMTPIDENTIFIER does not exist.", smtpID)
					}
					return err
				}
			}
		}
		rev, err := store.BumpConfigRevision(tx)
		if err != nil {
			return err
		}
		rec.Schema, rec.Rev, id = schema, rev, rec.ID
		if err := store.PutJSON(b, []byte(g.Name), rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return 0, fmt.Errorf("sms gateway %s: %w", g.Name, err)
	}
	return id, nil
}

func (r gatewayRecord) def() Gateway {
	g := Gateway{ID: r.ID, Name: r.Name, Module: r.Module, Description: r.Description,
		Options: map[string]string{}, Headers: map[string]string{}, SecretOptions: []string{}, SecretHeaders: []string{}}
	for k, v := range r.Options {
		if v.Sealed != nil {
			g.Options[k] = Censored
			g.SecretOptions = append(g.SecretOptions, k)
			continue
		}
		g.Options[k] = v.V
	}
	for k, v := range r.Headers {
		if v.Sealed != nil {
			g.Headers[k] = Censored
			g.SecretHeaders = append(g.SecretHeaders, k)
			continue
		}
		g.Headers[k] = v.V
	}
	slices.Sort(g.SecretOptions)
	slices.Sort(g.SecretHeaders)
	return g
}

func (s *Service) gatewayRecords(ctx context.Context) ([]gatewayRecord, error) {
	var recs []gatewayRecord
	err := s.st.View(ctx, func(tx store.Tx) error {
		recs = recs[:0]
		return tx.Bucket(smsBucket).ForEach(nil, func(_, v []byte) error {
			var rec gatewayRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			recs = append(recs, rec)
			return nil
		})
	})
	slices.SortFunc(recs, func(a, b gatewayRecord) int { return a.ID - b.ID })
	return recs, err
}

// Gateways returns the gateway with the given id, or all of them when id
// is 0, ordered by id, with secrets censored. An unknown id gives an
// empty list.
func (s *Service) Gateways(ctx context.Context, id int) ([]Gateway, error) {
	recs, err := s.gatewayRecords(ctx)
	if err != nil {
		return nil, err
	}
	out := []Gateway{}
	for _, r := range recs {
		if id == 0 || r.ID == id {
			out = append(out, r.def())
		}
	}
	return out, nil
}

// DeleteGateway removes the gateway name and returns its id; also runs in
// the change's transaction.
func (s *Service) DeleteGateway(ctx context.Context, name string, also ...func(store.Tx) error) (int, error) {
	var id int
	err := s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(smsBucket)
		var rec gatewayRecord
		if err := store.GetJSON(b, []byte(name), &rec); errors.Is(err, store.ErrNotFound) {
			return ErrGatewayNotFound
		} else if err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		id = rec.ID
		if err := b.Delete([]byte(name)); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return id, err
}

// ErrOptionNotFound is returned when deleting an option a gateway does not
// have.
var ErrOptionNotFound = apierr.New(apierr.ResourceNotFound, "The requested SMSGateway option could not be found.")

// DeleteGatewayOption removes one option of gateway gwid, or one header
// when key is "header.<name>". privacyIDEA returns the option's row id;
// options have no ids of their own here, so it returns gwid. Each of also
// runs in the change's transaction.
func (s *Service) DeleteGatewayOption(ctx context.Context, gwid int, key string, also ...func(store.Tx) error) (int, error) {
	err := s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(smsBucket)
		var rec gatewayRecord
		found := false
		err := b.ForEach(nil, func(_, v []byte) error {
			var r gatewayRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if r.ID == gwid {
				rec, found = r, true
				return store.ErrStop
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !found {
			return ErrGatewayNotFound
		}
		m := rec.Options
		if h, ok := strings.CutPrefix(key, kindHeader); ok {
			m, key = rec.Headers, h
		}
		if _, ok := m[key]; !ok {
			return ErrOptionNotFound
		}
		delete(m, key)
		rev, err := store.BumpConfigRevision(tx)
		if err != nil {
			return err
		}
		rec.Schema, rec.Rev = schema, rev
		if err := store.PutJSON(b, []byte(rec.Name), rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return 0, err
	}
	return gwid, nil
}

// SendSMS sends text to phone through the gateway named gateway. A
// delivery failure wraps [ErrSendFailed]; an unusable phone number is a
// Parameter error.
func (s *Service) SendSMS(ctx context.Context, gateway, phone, text string) error {
	var rec gatewayRecord
	err := s.st.View(ctx, func(tx store.Tx) error {
		err := store.GetJSON(tx.Bucket(smsBucket), []byte(gateway), &rec)
		if errors.Is(err, store.ErrNotFound) {
			return ErrGatewayNotFound
		}
		return err
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(phone) == "" {
		return apierr.MissingParameter("phone")
	}
	if hasControl(phone) {
		return paramErr("The phone number contains a control character.")
	}
	opts, err := s.openValues(rec, kindOption, rec.Options)
	if err != nil {
		return err
	}
	headers, err := s.openValues(rec, kindHeader, rec.Headers)
	if err != nil {
		return err
	}
	if !supported(rec.Module) {
		return sendErr(fmt.Sprintf("The SMS provider module %s of gateway %s is not supported by authsrv.", shortModule(rec.Module), rec.Name), nil)
	}
	phone = mangle(phone, opts["REGEXP"])
	switch rec.Module {
	case ModuleHTTP:
		h := http.Header{}
		for k, v := range headers {
			h.Set(k, v)
		}
		return s.sendHTTP(ctx, rec.Name, opts, h, phone, text)
	case ModuleSMTP:
		return s.sendSMSMail(ctx, opts, phone, text)
	default:
		return s.runScript(ctx, rec.Name, opts, phone, text)
	}
}

// openValues returns the plain values of an option or header set.
func (s *Service) openValues(rec gatewayRecord, kind string, in map[string]gwValue) (map[string]string, error) {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if v.Sealed == nil {
			out[k] = v.V
			continue
		}
		p, err := s.open(v.Sealed, smsBucket, rec.Name, kind+k)
		if err != nil {
			return nil, err
		}
		out[k] = p
	}
	return out, nil
}

// sendSMSMail is the SMTP provider: one mail to MAILTO through the SMTP
// server SMTPIDENTIFIER.
func (s *Service) sendSMSMail(ctx context.Context, opts map[string]string, phone, text string) error {
	subject, body := "{phone}", "{otp}"
	if v, ok := opts["SUBJECT"]; ok {
		subject = v
	}
	if v, ok := opts["BODY"]; ok {
		body = v
	}
	return s.SendMail(ctx, opts["SMTPIDENTIFIER"], Mail{
		To:      []string{replaceTags(opts["MAILTO"], phone, text)},
		Subject: replaceTags(subject, phone, text),
		Body:    replaceTags(body, phone, text),
	})
}
