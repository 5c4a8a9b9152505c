package machine_test

import (
	"context"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
)

// deletingSource is a token source whose token is deleted right after
// Attach has looked it up: the deletion that lands between the check and
// the write.
type deletingSource struct {
	*token.Service
}

func (d deletingSource) Get(ctx context.Context, serial string) (*token.Token, error) {
	t, err := d.Service.Get(ctx, serial)
	if err == nil {
		err = d.Service.Delete(ctx, serial)
	}
	return t, err
}

func (d deletingSource) ExistsTx(tx store.Tx, serial string) bool {
	return d.Service.ExistsTx(tx, serial)
}

// TestAttachTokenDeletedMeanwhile: a token deleted after Attach checked it
// gets no binding.
func TestAttachTokenDeletedMeanwhile(t *testing.T) {
	e := newOfflineEnv(t, false)
	mt := machine.NewTokens(machine.TokensConfig{Store: e.st, Tokens: deletingSource{e.tokens}})
	mt.Apps().Register(e.off)
	_, err := mt.Attach(t.Context(), machine.AttachRequest{Serial: "OATH1", Application: machine.OfflineName})
	if !apierr.Is(err, apierr.ResourceNotFound) {
		t.Fatalf("attach to a token deleted meanwhile: %v", err)
	}
	list, err := mt.List(t.Context(), machine.Query{Serial: "OATH1"})
	if err != nil || len(list.Tokens) != 0 {
		t.Fatalf("bindings %+v %v", list.Tokens, err)
	}
}
