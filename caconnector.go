package authsrv

import (
	"context"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/caconnector"
	"github.com/authsrv/authsrv/token"
)

// initCAConnectors builds the CA connectors (their files confined as the
// other configured files are) and registers the certificate token type
// with them, unless the embedder registers its own.
func (s *Server) initCAConnectors(c *config, reg *token.Registry) {
	s.caconnectors = caconnector.New(caconnector.Config{Store: s.st, Files: c.files(), Now: c.now, Rand: c.rand,
		Log: c.log.With().Str("component", "caconnector").Logger()})
	if slices.ContainsFunc(c.tokenTypes, func(t token.Type) bool { return strings.EqualFold(t.Name(), "certificate") }) {
		return
	}
	reg.Register(token.Certificate{CAs: s.caconnectors})
}

// CAConnectors returns the CA connectors: the definitions (through Ops
// for audited changes), signing, revocation lists and CRLs.
func (s *Server) CAConnectors() *caconnector.Service { return s.caconnectors }

// runCRLs keeps the CRLs of the local CAs fresh until ctx ends or the
// server closes: a CRL is written again within its overlap period and
// after revocations (a revocation also writes it at once).
func (s *Server) runCRLs(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	s.caconnectors.Run(ctx, 0)
}
