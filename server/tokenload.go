package server

import "github.com/authsrv/authsrv/apierr"

// postTokenLoad is POST /token/load/{filename} (admin).
func postTokenLoad(c *call) (answer, error) {
	return answer{}, apierr.New(apierr.TokenImport, "not yet wired")
}
