package server

import (
	"net/http"

	"github.com/authsrv/authsrv/monitoring"
)

// The client applications: GET /client/ (authsrv.Ops.ClientApps).

// clientAppsJSON is GET /client/'s answer: the clients by client type,
// each {ip, hostname (always null, as privacyIDEA never fills it),
// lastseen in Flask's date form}.
func clientAppsJSON(byType map[string][]monitoring.ClientApp) map[string]any {
	out := make(map[string]any, len(byType))
	for typ, list := range byType {
		rows := make([]any, 0, len(list))
		for _, c := range list {
			rows = append(rows, map[string]any{"ip": c.IP.String(), "hostname": nil,
				"lastseen": c.LastSeen.UTC().Format(http.TimeFormat)})
		}
		out[typ] = rows
	}
	return out
}

// getClients is GET /client/: the client applications by client type.
func getClients(c *call) (answer, error) {
	byType, err := c.a.s.Ops().ClientApps(c.ctx, c.caller())
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: clientAppsJSON(byType)}, nil
}
