package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// routes registers every route of the API. Each route is registered with
// and without its trailing slash (see handle). httprouter panics when a
// static segment and a :param are siblings, so such paths get one :param
// route that dispatches inside its handler.
func (a *api) routes() {
	// Health probes: anonymous, bare JSON bodies, GET only.
	a.probe("/healthz/", a.readyz)
	a.probe("/healthz/livez", a.livez)
	a.probe("/healthz/startupz", a.startupz)
	a.probe("/healthz/readyz", a.readyz)

	// Authentication.
	a.handle(http.MethodPost, "/auth", endpoint{access: public, authLimit: true, fn: postAuth})
}

// probe registers a health probe for both slash forms.
func (a *api) probe(path string, h httprouter.Handle) {
	a.router.GET(path, h)
	a.endpoints = append(a.endpoints, routeInfo{http.MethodGet, path, public, ""})
	alt := path[:len(path)-1]
	if path[len(path)-1] != '/' {
		alt = path + "/"
	}
	a.router.GET(alt, h)
}
