package authsrv

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/sysconfig"
	"github.com/authsrv/authsrv/token"
)

// SystemConfig returns the system configuration (privacyIDEA's system
// settings), for tools; what it does bypasses the rights, the audit and
// the event handlers (Ops.SetSystemConfig and friends apply them).
func (s *Server) SystemConfig() *sysconfig.Service { return s.sysconf }

// openSysConfig builds the system configuration: the token settings of
// the options (WithTokenSettings) are its defaults, the registered token
// types add their challenge validity times, and every snapshot is turned
// once into the token settings the token service reads (tokenSettings).
func (s *Server) openSysConfig(reg *token.Registry) error {
	base := s.cfg.tokenSettings.WithDefaults()
	var extra []sysconfig.Key
	known := map[string]bool{}
	for _, k := range sysconfig.Builtin() {
		known[k.Name] = true
	}
	for _, name := range reg.Names() {
		k := sysconfig.ChallengeValidityKey(name)
		if !known[k.Name] {
			known[k.Name] = true
			extra = append(extra, k)
		}
	}
	defaults := settingsDefaults(base)
	for k, v := range base.Values {
		if known[k] {
			defaults[k] = v
		}
	}
	svc, err := sysconfig.New(sysconfig.Config{
		Store: s.st, Defaults: defaults, Extra: extra, Check: s.checkSysConfig,
		Derive: func(sn *sysconfig.Snapshot) any { return deriveTokenSettings(base, sn) },
		Log:    s.cfg.log,
	})
	if err != nil {
		return err
	}
	s.sysconf = svc
	return nil
}

// tokenSettings is the token service's Config.Source: the settings of
// the system configuration in use (an atomic load and a time check).
func (s *Server) tokenSettings() *token.Settings {
	set, _ := s.sysconf.Current().Derived().(*token.Settings)
	return set
}

// boolText is a boolean as privacyIDEA stores it.
func boolText(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// ceilUnits is d in whole units, rounded up (so that a short timeout
// does not read as 0, "off").
func ceilUnits(d, unit time.Duration) string {
	return strconv.FormatInt(int64((d+unit-1)/unit), 10)
}

// settingsDefaults are the system settings that the token settings of
// the options give.
func settingsDefaults(set token.Settings) map[string]string {
	hash := func(h string) string {
		if h == "" {
			return "sha1"
		}
		return h
	}
	return map[string]string{
		"DefaultOtpLen":                strconv.Itoa(set.DefaultOtpLen),
		"DefaultCountWindow":           strconv.Itoa(set.DefaultCountWindow),
		"DefaultSyncWindow":            strconv.Itoa(set.DefaultSyncWindow),
		"DefaultMaxFailCount":          strconv.Itoa(set.DefaultMaxFailCount),
		"failcounter_clear_timeout":    ceilUnits(set.FailcounterClearTime, time.Minute),
		"DefaultChallengeValidityTime": ceilUnits(set.ChallengeValidity, time.Second),
		"AutoResync":                   boolText(set.AutoResync),
		"AutoResyncTimeout":            ceilUnits(set.AutoResyncTimeout, time.Second),
		"PrependPin":                   boolText(!set.AppendPIN),
		"splitAtSign":                  boolText(!set.NoSplitAtSign),
		"IncFailCountOnFalsePin":       boolText(!set.NoIncFailCountOnFalsePin),
		"no_auth_counter":              boolText(set.NoAuthCounter),
		"hotp.hashlib":                 hash(set.HOTPHashlib),
		"totp.hashlib":                 hash(set.TOTPHashlib),
		"totp.timeStep":                strconv.Itoa(set.TOTPTimeStep),
		"totp.timeWindow":              strconv.Itoa(set.TOTPTimeWindow),
	}
}

// deriveTokenSettings is base with the stored settings of sn applied;
// Values holds every effective setting (base.Values' other keys kept).
// Settings that are not stored keep base's exact values (a sub-minute
// clear timeout of the options stays as given).
func deriveTokenSettings(base token.Settings, sn *sysconfig.Snapshot) *token.Settings {
	set := base
	set.Values = maps.Clone(base.Values)
	if set.Values == nil {
		set.Values = map[string]string{}
	}
	maps.Copy(set.Values, sn.Values())
	ints := map[string]*int{
		"DefaultOtpLen": &set.DefaultOtpLen, "DefaultCountWindow": &set.DefaultCountWindow,
		"DefaultSyncWindow": &set.DefaultSyncWindow, "DefaultMaxFailCount": &set.DefaultMaxFailCount,
		"totp.timeStep": &set.TOTPTimeStep, "totp.timeWindow": &set.TOTPTimeWindow,
	}
	for k, p := range ints {
		if sn.Stored(k) {
			*p = sn.Int(k)
		}
	}
	durations := map[string]struct {
		p    *time.Duration
		unit time.Duration
	}{
		"failcounter_clear_timeout":    {&set.FailcounterClearTime, time.Minute},
		"DefaultChallengeValidityTime": {&set.ChallengeValidity, time.Second},
		"AutoResyncTimeout":            {&set.AutoResyncTimeout, time.Second},
	}
	for k, d := range durations {
		if sn.Stored(k) {
			*d.p = time.Duration(sn.Int(k)) * d.unit
		}
	}
	bools := map[string]struct {
		p      *bool
		invert bool
	}{
		"AutoResync": {&set.AutoResync, false}, "no_auth_counter": {&set.NoAuthCounter, false},
		"PrependPin": {&set.AppendPIN, true}, "splitAtSign": {&set.NoSplitAtSign, true},
		"IncFailCountOnFalsePin": {&set.NoIncFailCountOnFalsePin, true},
	}
	for k, b := range bools {
		if sn.Stored(k) {
			*b.p = sn.Bool(k) != b.invert
		}
	}
	if sn.Stored("hotp.hashlib") {
		set.HOTPHashlib = sn.Value("hotp.hashlib")
	}
	if sn.Stored("totp.hashlib") {
		set.TOTPHashlib = sn.Value("totp.hashlib")
	}
	set = set.WithDefaults()
	return &set
}

// checkSysConfig refuses identifiers of SMTP servers and SMS gateways
// that do not exist, so that the e-mail and SMS tokens do not fail at
// every login instead.
func (s *Server) checkSysConfig(ctx context.Context, key, value string) error {
	switch key {
	case "email.identifier":
		list, err := s.notify.SMTPServers(ctx)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(list, func(d notify.SMTPServer) bool { return d.Identifier == value }) {
			return apierr.Newf(apierr.Parameter, "email.identifier: there is no SMTP server %q.", value)
		}
	case "sms.identifier":
		list, err := s.notify.Gateways(ctx, 0)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(list, func(g notify.Gateway) bool { return g.Name == value }) {
			return apierr.Newf(apierr.Parameter, "sms.identifier: there is no SMS gateway %q.", value)
		}
	}
	return nil
}
