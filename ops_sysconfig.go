package authsrv

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"io"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/sysconfig"
)

// Rights of the system configuration (admin scope).
const (
	rightConfigRead   = "configread"
	rightConfigWrite  = "configwrite"
	rightConfigDelete = "configdelete"
	rightGetRandom    = "getrandom"
)

// Events of the system configuration operations. privacyIDEA's system
// endpoints fire no events (admin-config.md 7.1); these names serve the
// program's own EventHandlers and match no privacyIDEA event.
const (
	eventGetConfig    = "get_config"
	eventSetConfig    = "set_config"
	eventDeleteConfig = "delete_config"
	eventGetRandom    = "get_random"
)

// setDefaultKeys are the settings POST /system/setDefault takes.
var setDefaultKeys = []string{"DefaultMaxFailCount", "DefaultSyncWindow", "DefaultCountWindow", "DefaultOtpLen", "DefaultResetFailCount"}

// Random bounds: GET /system/random answers 1 to maxRandomBytes bytes.
const (
	defaultRandomBytes = 20
	maxRandomBytes     = 1024
)

// SystemSettings reads the system configuration (GET /system/[key]): an
// administrator (right configread) gets every setting, a user only the
// public ones. With key, only that setting, or none when it is unknown or
// not readable by the caller.
func (o *Ops) SystemSettings(ctx context.Context, who caller.Caller, key string) ([]sysconfig.Setting, error) {
	var out []sysconfig.Setting
	action := "GET /system/" + key
	err := o.run(ctx, who, opSpec{event: eventGetConfig, action: action, right: adminRight(who, rightConfigRead)},
		func(ctx context.Context, r *opRun) error {
			if !who.IsAdmin() && who.Role != caller.User {
				return errAdminOnly
			}
			publicOnly := who.Role == caller.User
			r.Entry.Info = audit.Text(key, 512)
			if key != "" {
				st, ok, err := o.s.sysconf.Get(ctx, key, publicOnly)
				out = []sysconfig.Setting{}
				if ok {
					out = append(out, st)
				}
				return err
			}
			var err error
			out, err = o.s.sysconf.List(ctx, publicOnly)
			return err
		})
	return out, err
}

// configInfo is the audit info of a configuration write: "key=value, "
// for each setting (no setting holds a secret).
func configInfo(changes []sysconfig.Change) string {
	var b strings.Builder
	for _, c := range changes {
		b.WriteString(c.Key + "=" + c.Value + ", ")
	}
	return audit.Text(b.String(), 512)
}

// SetSystemConfig stores system settings (POST /system/setConfig; right
// configwrite): every key known and every value of its kind, or nothing
// is stored. It answers "insert" or "update" by key. The change takes
// effect at once on this server and within a second on the others
// sharing the store.
func (o *Ops) SetSystemConfig(ctx context.Context, who caller.Caller, changes []sysconfig.Change) (map[string]string, error) {
	var res map[string]string
	err := o.adminOnlyOp(ctx, who, eventSetConfig, "POST /system/setConfig", rightConfigWrite,
		func(ctx context.Context, r *opRun) error {
			checked, err := o.s.sysconf.Check(ctx, changes)
			if err != nil {
				return err
			}
			r.Entry.Info = configInfo(checked)
			res, err = o.s.sysconf.Set(ctx, checked, r.Audit)
			return err
		})
	return res, err
}

// SetSystemDefaults is POST /system/setDefault (right configwrite): the
// token defaults among params (DefaultMaxFailCount, DefaultSyncWindow,
// DefaultCountWindow, DefaultOtpLen, DefaultResetFailCount, named in any
// case) are stored as SetSystemConfig stores them; none of them is a
// usage error (ERR77).
func (o *Ops) SetSystemDefaults(ctx context.Context, who caller.Caller, params map[string]string) (map[string]string, error) {
	var res map[string]string
	err := o.adminOnlyOp(ctx, who, eventSetConfig, "POST /system/setDefault", rightConfigWrite,
		func(ctx context.Context, r *opRun) error {
			lower := map[string]string{}
			for k, v := range params {
				lower[strings.ToLower(k)] = v
			}
			var changes []sysconfig.Change
			for _, k := range setDefaultKeys {
				if v, ok := lower[strings.ToLower(k)]; ok {
					changes = append(changes, sysconfig.Change{Key: k, Value: v})
				}
			}
			if len(changes) == 0 {
				return apierr.New(apierr.Parameter, "Usage: parameters are: "+strings.Join(setDefaultKeys, ", ")).WithNumber(77)
			}
			checked, err := o.s.sysconf.Check(ctx, changes)
			if err != nil {
				return err
			}
			r.Entry.Info = configInfo(checked)
			res, err = o.s.sysconf.Set(ctx, checked, r.Audit)
			return err
		})
	return res, err
}

// DeleteSystemConfig removes the stored value of key (DELETE
// /system/<key>; right configdelete), so that its default applies again;
// deleted is false when nothing was stored. An unknown key is a
// Parameter error.
func (o *Ops) DeleteSystemConfig(ctx context.Context, who caller.Caller, key string) (deleted bool, err error) {
	err = o.adminOnlyOp(ctx, who, eventDeleteConfig, "DELETE /system/"+key, rightConfigDelete,
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text(key, 512)
			n, err := o.s.sysconf.Delete(ctx, key, r.Audit)
			deleted = n > 0
			return err
		})
	return deleted, err
}

// Random returns n random bytes (0: 20) encoded as hex, or as standard
// base64 when encode is "b64" (GET /system/random; right getrandom). The
// value is never written to the audit log.
func (o *Ops) Random(ctx context.Context, who caller.Caller, n int, encode string) (string, error) {
	var out string
	err := o.adminOnlyOp(ctx, who, eventGetRandom, "GET /system/random", rightGetRandom,
		func(ctx context.Context, r *opRun) error {
			if n == 0 {
				n = defaultRandomBytes
			}
			if n < 1 || n > maxRandomBytes {
				return apierr.Newf(apierr.Parameter, "len must be between 1 and %d.", maxRandomBytes)
			}
			if encode != "" && encode != "hex" && encode != "b64" {
				return apierr.New(apierr.Parameter, "encode must be hex or b64.")
			}
			buf := make([]byte, n)
			if _, err := io.ReadFull(o.s.cfg.rand, buf); err != nil {
				return err
			}
			r.Entry.Info = audit.Text("len="+strconv.Itoa(n)+" encode="+encode, 512)
			if encode == "b64" {
				out = base64.StdEncoding.EncodeToString(buf)
			} else {
				out = hex.EncodeToString(buf)
			}
			return nil
		})
	return out, err
}
