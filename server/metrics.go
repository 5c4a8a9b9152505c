package server

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/authsrv/authsrv/metrics"
)

// metered reports every request of the route (pattern, method) to the
// server's metrics sink: its status code and how long it took. The route
// is the registered pattern ("/token/:serial"), never the request's path,
// so that no serial, user or realm becomes a label. Without metrics h is
// returned as it is and requests pay nothing.
func (a *api) metered(method, pattern string, h httprouter.Handle) httprouter.Handle {
	sink := a.s.Metrics()
	if metrics.IsNop(sink) {
		return h
	}
	o := sink.Route(pattern, method)
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		start := time.Now()
		// The access log's writer (the middleware's) already tracks the
		// status; another writer is wrapped only without it.
		sw, ok := w.(statusReporter)
		if !ok {
			own := &statusWriter{ResponseWriter: w}
			w, sw = own, own
		}
		done := false
		defer func() {
			code := sw.Status()
			switch {
			case !done:
				// The handler panicked; the recoverer answers 500.
				code = http.StatusInternalServerError
			case code == 0:
				code = http.StatusOK
			}
			o.Observe(code, time.Since(start))
		}()
		h(w, r, ps)
		done = true
	}
}

// statusReporter is a writer that knows the status code it sent (0 for
// none yet).
type statusReporter interface{ Status() int }

// statusWriter remembers the status code of the answer.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Status() int { return w.code }

// Unwrap gives http.ResponseController the writer underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
