package token

import (
	"context"

	"github.com/authsrv/authsrv/store"
)

// CancelRollout removes a token whose enrollment during an authentication
// is cancelled: in one transaction, and only while the token is still in
// rollout state clientwait and owns an unexpired challenge of txid in the
// given session. The token goes with all its challenges, and the other
// challenges of the transaction too. It reports whether it removed the
// token; a transaction that does not qualify (any more) changes nothing.
func (s *Service) CancelRollout(ctx context.Context, txid, serial, session string) (bool, error) {
	done := false
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		done = false
		r, live, err := s.liveChallenge(tx, txid, serial)
		if err != nil || !live || r.Session != session {
			return err
		}
		t, err := s.load(tx, serial)
		if err != nil || t == nil || t.RolloutState != StateClientWait {
			return err
		}
		if err := s.remove(tx, t); err != nil {
			return err
		}
		if _, err := deleteChallengesTx(tx, []byte(txid+"\x00"), func(_, _ []byte) bool { return true }); err != nil {
			return err
		}
		done = true
		return nil
	})
	return done, err
}
