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

// defaultAuditCleanupInterval is how often serve applies the audit
// retention when -audit-max-age or -audit-max-entries is set.
const defaultAuditCleanupInterval = time.Hour

// auditRetention holds serve's audit retention flags. Without a limit the
// server keeps every entry, as privacyIDEA does (it rotates its audit
// table only when an operator runs pi-manage audit rotate).
type auditRetention struct {
	maxAge     days
	maxEntries uint64
	interval   time.Duration
}

func (r *auditRetention) register(fs *flag.FlagSet) {
	fs.Var(&r.maxAge, "audit-max-age", "remove audit entries older than this (e.g. 2160h or 90d); default: keep them")
	fs.Uint64Var(&r.maxEntries, "audit-max-entries", 0, "keep only the newest N audit entries (0: no limit)")
	fs.DurationVar(&r.interval, "audit-cleanup-interval", defaultAuditCleanupInterval, "how often the audit retention runs (with -audit-max-age or -audit-max-entries)")
}

// option is the retention to give the server. Without a limit there is
// none; an interval given alone is an error, since it would do nothing.
func (r *auditRetention) option(fs *flag.FlagSet) (authsrv.Option, error) {
	if r.interval <= 0 {
		return nil, fmt.Errorf("-audit-cleanup-interval %s: want more than 0", r.interval)
	}
	if r.maxAge == 0 && r.maxEntries == 0 {
		given := false // on the command line or from the environment
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "audit-cleanup-interval" })
		if given {
			return nil, errors.New("-audit-cleanup-interval needs -audit-max-age or -audit-max-entries")
		}
		return nil, nil
	}
	return authsrv.WithAuditRetention(time.Duration(r.maxAge), r.maxEntries, r.interval), nil
}

// maxDays is the longest age in days that a time.Duration holds.
const maxDays = uint64(1<<63-1) / uint64(24*time.Hour)

// days is a duration flag that also takes a whole number of days ("90d").
type days time.Duration

func (d *days) String() string {
	if d == nil || *d == 0 {
		return "0s"
	}
	return time.Duration(*d).String()
}

func (d *days) Set(v string) error {
	var dur time.Duration
	if n, ok := strings.CutSuffix(v, "d"); ok {
		k, err := strconv.ParseUint(n, 10, 32)
		if err != nil || k > maxDays {
			return fmt.Errorf("%q: want a duration such as 720h or a number of days such as 30d", v)
		}
		dur = time.Duration(k) * 24 * time.Hour
	} else {
		var err error
		if dur, err = time.ParseDuration(v); err != nil {
			return fmt.Errorf("%q: want a duration such as 720h or a number of days such as 30d", v)
		}
	}
	if dur < 0 {
		return fmt.Errorf("%q: want 0 (keep everything) or more", v)
	}
	*d = days(dur)
	return nil
}
