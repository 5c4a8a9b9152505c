package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv"
)

// Serve's default audit retention: entries older than 180 days go, checked
// every hour. "-audit-max-age off" (without -audit-max-entries) keeps every
// entry, as privacyIDEA does (it rotates its audit table only when an
// operator runs pi-manage audit rotate).
const (
	defaultAuditMaxAge          = 180 * 24 * time.Hour
	defaultAuditCleanupInterval = time.Hour
)

// auditRetention holds serve's audit retention flags.
type auditRetention struct {
	maxAge     days
	maxEntries uint64
	interval   time.Duration
}

func (r *auditRetention) register(fs *flag.FlagSet) {
	r.maxAge = days{d: defaultAuditMaxAge}
	fs.Var(&r.maxAge, "audit-max-age", "remove audit entries older than this (e.g. 2160h or 90d); off: no age limit (with no -audit-max-entries every entry is kept and the data file grows without bound)")
	fs.Uint64Var(&r.maxEntries, "audit-max-entries", 0, "keep only the newest N audit entries (0: no limit)")
	fs.DurationVar(&r.interval, "audit-cleanup-interval", defaultAuditCleanupInterval, "how often the audit retention runs")
}

// option is the retention to give the server: none only when the age limit
// is off and there is no count limit. An interval given then is an error,
// since it would do nothing.
func (r *auditRetention) option(fs *flag.FlagSet) (authsrv.Option, error) {
	if r.interval <= 0 {
		return nil, fmt.Errorf("-audit-cleanup-interval %s: want more than 0", r.interval)
	}
	if r.maxAge.off && r.maxEntries == 0 {
		given := false // on the command line or from the environment
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "audit-cleanup-interval" })
		if given {
			return nil, errors.New("-audit-cleanup-interval does nothing with -audit-max-age off and no -audit-max-entries: every entry is kept")
		}
		return nil, nil
	}
	return authsrv.WithAuditRetention(r.maxAge.d, r.maxEntries, r.interval), nil
}

// maxDays is the longest age in days that a time.Duration holds.
const maxDays = uint64(1<<63-1) / uint64(24*time.Hour)

// days is a duration flag that also takes a whole number of days ("90d"),
// or "off" for no limit.
type days struct {
	d   time.Duration
	off bool
}

func (d *days) String() string {
	switch {
	case d == nil || (d.d == 0 && !d.off):
		return "0s"
	case d.off:
		return "off"
	case d.d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d.d/(24*time.Hour))
	}
	return d.d.String()
}

func (d *days) Set(v string) error {
	if v == "off" {
		*d = days{off: true}
		return nil
	}
	var dur time.Duration
	if n, ok := strings.CutSuffix(v, "d"); ok {
		k, err := strconv.ParseUint(n, 10, 32)
		if err != nil || k > maxDays {
			return fmt.Errorf("%q: want a duration such as 720h, a number of days such as 30d, or off", v)
		}
		dur = time.Duration(k) * 24 * time.Hour
	} else {
		var err error
		if dur, err = time.ParseDuration(v); err != nil {
			return fmt.Errorf("%q: want a duration such as 720h, a number of days such as 30d, or off", v)
		}
	}
	if dur <= 0 {
		return fmt.Errorf("%q: want more than 0, or off for no age limit", v)
	}
	*d = days{d: dur}
	return nil
}
