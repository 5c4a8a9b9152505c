package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
)

// The control socket lets the authsrv command manage a running server's
// data directory (backups, local administrators, JWT key rotation) while the server holds the
// store's lock. It listens on a Unix socket inside the data directory,
// reachable only by the data directory's owner, and is never exposed on a
// network.

// controlCaller is the caller of the control socket: the data directory's
// owner on this machine, a trusted local operator.
var controlCaller = caller.Caller{UserAgent: "authsrv-control"}

// ControlSocket is the socket's file name inside the data directory.
const ControlSocket = "control.sock"

// Control returns the control socket's handler.
func Control(s *authsrv.Server) http.Handler {
	a := &api{s: s, limitAuth: bodyLimitAuth, limitAdmin: bodyLimitAdmin}
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	ctl := func(fn func(c *call) (answer, error)) httprouter.Handle {
		return func(w http.ResponseWriter, req *http.Request, ps httprouter.Params) {
			p, err := decodeParams(req, ps, a.limitAdmin)
			if err != nil {
				a.writeError(w, req, err)
				return
			}
			ans, err := fn(&call{ctx: req.Context(), r: req, w: w, p: p, a: a})
			if err != nil {
				a.writeError(w, req, err)
				return
			}
			a.writeAnswer(w, ans)
		}
	}
	r.GET("/backup", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
		w.Header().Set("Content-Type", "application/x-tar")
		if _, err := s.Backup(req.Context(), w); err != nil {
			// The body may have started: abort the connection so the
			// client sees a broken stream, never a short "good" backup.
			log := s.Logger()
			log.Error().Err(err).Msg("backup over the control socket")
			panic(http.ErrAbortHandler)
		}
	})
	r.GET("/audit/verify", ctl(func(c *call) (answer, error) {
		rep, err := s.Audit().Verify(c.ctx)
		return answer{value: rep}, err
	}))
	r.GET("/admins", ctl(func(c *call) (answer, error) {
		list, err := s.Admins().List(c.ctx)
		return answer{value: list}, err
	}))
	r.POST("/admins", ctl(func(c *call) (answer, error) {
		name, err := c.p.required("username")
		if err != nil {
			return answer{}, err
		}
		pw, err := c.p.required("password")
		if err != nil {
			return answer{}, err
		}
		return answer{value: true}, s.Ops().AddAdmin(c.ctx, controlCaller, name, pw)
	}))
	r.PUT("/admins/:name", ctl(func(c *call) (answer, error) {
		pw, err := c.p.required("password")
		if err != nil {
			return answer{}, err
		}
		name, _ := c.p.str("name")
		return answer{value: true}, s.Ops().SetAdminPassword(c.ctx, controlCaller, name, pw)
	}))
	r.DELETE("/admins/:name", ctl(func(c *call) (answer, error) {
		name, _ := c.p.str("name")
		return answer{value: true}, s.Ops().DeleteAdmin(c.ctx, controlCaller, name)
	}))
	for _, path := range []string{"/admins/:name/disable", "/admins/:name/enable"} {
		disable := path == "/admins/:name/disable"
		r.POST(path, ctl(func(c *call) (answer, error) {
			name, _ := c.p.str("name")
			return answer{value: true}, s.Ops().SetAdminDisabled(c.ctx, controlCaller, name, disable)
		}))
	}
	r.POST("/jwt/rotate", ctl(func(c *call) (answer, error) {
		drop, err := c.p.boolean("drop_old")
		if err != nil {
			return answer{}, err
		}
		k, err := s.Ops().RotateJWTKey(c.ctx, controlCaller, authsrv.JWTRotation{DropOld: drop})
		return answer{value: k}, err
	}))
	r.GET("/jwt/keys", ctl(func(c *call) (answer, error) {
		return answer{value: s.JWTKeys()}, nil
	}))
	r.POST("/apikey", ctl(func(c *call) (answer, error) {
		days, err := c.p.integer("validity_days", DefaultAPIKeyDays)
		if err != nil {
			return answer{}, err
		}
		validity, err := APIKeyValidity(days)
		if err != nil {
			return answer{}, apierr.New(apierr.Parameter, err.Error())
		}
		tok, exp, err := NewAPIKey(s, validity)
		if err != nil {
			return answer{}, err
		}
		return answer{value: apiKeyAnswer{Token: tok, Expires: exp}}, nil
	}))
	return a.recoverer(r)
}

// apiKeyAnswer is the control socket's answer to POST /apikey.
type apiKeyAnswer struct {
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// CreateAPIKey has the running server sign an API key (a JWT of role
// validate) valid for days.
func (cc *ControlClient) CreateAPIKey(ctx context.Context, days int) (string, time.Time, error) {
	var out apiKeyAnswer
	err := cc.do(ctx, http.MethodPost, "/apikey", map[string]int{"validity_days": days}, &out)
	return out.Token, out.Expires, err
}

// ListenControl removes a stale socket and listens on dir's control socket
// with mode 0600. Call it only while holding the data directory (after
// authsrv.New succeeded), so no other server owns the socket.
func ListenControl(dir string) (net.Listener, error) {
	path := dir + string(os.PathSeparator) + ControlSocket
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return l, nil
}

// ControlClient talks to a running server's control socket.
type ControlClient struct {
	hc *http.Client
}

// DialControl returns a client for dir's control socket. It fails when no
// server listens there.
func DialControl(dir string) (*ControlClient, error) {
	path := dir + string(os.PathSeparator) + ControlSocket
	conn, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("no running server answers on %s: %w", path, err)
	}
	_ = conn.Close()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &ControlClient{hc: &http.Client{Transport: tr}}, nil
}

// Backup streams the running server's backup into w.
func (cc *ControlClient) Backup(ctx context.Context, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://control/backup", nil)
	if err != nil {
		return 0, err
	}
	resp, err := cc.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("backup: the server answered %s", resp.Status)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("backup: the stream broke: %w", err)
	}
	return n, nil
}

// AuditVerify verifies the running server's audit log.
func (cc *ControlClient) AuditVerify(ctx context.Context) (audit.Report, error) {
	var rep audit.Report
	return rep, cc.do(ctx, http.MethodGet, "/audit/verify", nil, &rep)
}

// Admins lists the administrators.
func (cc *ControlClient) Admins(ctx context.Context) ([]AdminInfo, error) {
	var out []AdminInfo
	return out, cc.do(ctx, http.MethodGet, "/admins", nil, &out)
}

// AdminInfo is an administrator as the control socket lists it.
type AdminInfo struct {
	Username        string    `json:"username"`
	Created         time.Time `json:"created"`
	PasswordChanged time.Time `json:"password_changed"`
	Disabled        bool      `json:"disabled"`
}

// AddAdmin creates an administrator.
func (cc *ControlClient) AddAdmin(ctx context.Context, name, password string) error {
	return cc.do(ctx, http.MethodPost, "/admins", map[string]string{"username": name, "password": password}, nil)
}

// SetAdminPassword replaces an administrator's password.
func (cc *ControlClient) SetAdminPassword(ctx context.Context, name, password string) error {
	return cc.do(ctx, http.MethodPut, "/admins/"+url.PathEscape(name), map[string]string{"password": password}, nil)
}

// DeleteAdmin removes an administrator.
func (cc *ControlClient) DeleteAdmin(ctx context.Context, name string) error {
	return cc.do(ctx, http.MethodDelete, "/admins/"+url.PathEscape(name), nil, nil)
}

// SetAdminDisabled disables or enables an administrator.
func (cc *ControlClient) SetAdminDisabled(ctx context.Context, name string, disabled bool) error {
	op := "/enable"
	if disabled {
		op = "/disable"
	}
	return cc.do(ctx, http.MethodPost, "/admins/"+url.PathEscape(name)+op, nil, nil)
}

// RotateJWTKey has the running server add a new current JWT key; it signs
// with it from then on.
func (cc *ControlClient) RotateJWTKey(ctx context.Context, opt authsrv.JWTRotation) (authsrv.JWTKey, error) {
	var k authsrv.JWTKey
	return k, cc.do(ctx, http.MethodPost, "/jwt/rotate", map[string]bool{"drop_old": opt.DropOld}, &k)
}

// JWTKeys describes the running server's JWT key ring.
func (cc *ControlClient) JWTKeys(ctx context.Context) ([]authsrv.JWTKey, error) {
	var out []authsrv.JWTKey
	return out, cc.do(ctx, http.MethodGet, "/jwt/keys", nil, &out)
}

func (cc *ControlClient) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://control"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", jsonType)
	}
	resp, err := cc.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var env struct {
		Result struct {
			Status bool            `json:"status"`
			Value  json.RawMessage `json:"value"`
			Error  *envError       `json:"error"`
		} `json:"result"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&env); err != nil {
		return fmt.Errorf("control socket: unreadable answer: %w", err)
	}
	if !env.Result.Status {
		if env.Result.Error != nil {
			return errors.New(env.Result.Error.Message)
		}
		return errors.New("control socket: request failed")
	}
	if out != nil {
		return json.Unmarshal(env.Result.Value, out)
	}
	return nil
}
