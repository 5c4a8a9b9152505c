package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// privacyIDEALike answers as privacyIDEA 3.10 does where it differs from
// authsrv for the driver: no /healthz/ (404, an HTML page), and
// /validate/check without a user is a JSON error with HTTP 400.
func privacyIDEALike(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/healthz/") {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("<html><body>404 Not Found</body></html>"))
			return
		}
		if r.URL.Path == "/validate/check" && r.Method == http.MethodPost {
			_ = r.ParseForm()
			if r.PostForm.Get("user") == "" {
				fakeReply(w, http.StatusBadRequest, "ERR905: Missing parameter: 'user'")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// TestSkipSetupWithoutHealthz: a -skip-setup load against a server
// without /healthz/livez (privacyIDEA 3.10) runs, the liveness probe
// falling back to /validate/check; a server that answers neither with
// JSON is refused with one clear message.
func TestSkipSetupWithoutHealthz(t *testing.T) {
	f := newFake(t)
	srv := httptest.NewServer(privacyIDEALike(f))
	t.Cleanup(srv.Close)
	state := filepath.Join(t.TempDir(), "state.json")
	env := map[string]string{envAdminPassword: f.password}
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"-url", srv.URL, "-users", "3", "-setup-only", "-state", state, "-passwd-dir", t.TempDir()},
		&out, &errOut, func(k string) string { return env[k] })
	if code != exitOK {
		t.Fatalf("setup-only: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	s, code, printed := runJSON(t, t.Context(), nil, "-url", srv.URL, "-skip-setup", "-state", state, "-clients", "2", "-duration", "200ms")
	if code != exitOK || s.Successes == 0 || s.Errors.Total != 0 {
		t.Fatalf("skip-setup without /healthz: exit %d %+v\n%s", code, s, printed)
	}

	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<html>nothing here</html>"))
	}))
	t.Cleanup(html.Close)
	_, code, printed = runJSON(t, t.Context(), nil, "-url", html.URL, "-skip-setup", "-state", state, "-duration", "200ms")
	if code != exitFailed || !strings.Contains(printed, "without a JSON envelope") || !strings.Contains(printed, "HTTP 404") {
		t.Errorf("a server that is not privacyIDEA-like: exit %d\n%s", code, printed)
	}
}
