package radius

import (
	"context"
	"net/netip"
)

// Handle answers packet b as if it came from src (nil: dropped), without a
// socket: for the fuzz target.
func (s *Server) Handle(ctx context.Context, src netip.AddrPort, b []byte) []byte {
	c := s.clients.lookup(src.Addr())
	if c == nil {
		return nil
	}
	return s.handle(ctx, c, src, b)
}
