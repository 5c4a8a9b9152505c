package authsrv

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/authsrv/authsrv/store"
)

// nodesBucket lists the nodes that have run on this store: id → record.
const nodesBucket = "nodes"

// nodeNamespace makes node ids stable: the same node name always gives the
// same id, on every start and every node.
var nodeNamespace = uuid.MustParse("6c1f6f8e-8f7b-4a33-9d5e-2a3c0b7e9d41")

// NodeID is the id of the node called name.
func NodeID(name string) string { return uuid.NewSHA1(nodeNamespace, []byte(name)).String() }

// Node is a node that has run on this store.
type Node struct {
	ID       string    `json:"uuid"`
	Name     string    `json:"name"`
	LastSeen time.Time `json:"last_seen"`
}

func registerNode(ctx context.Context, st store.Store, id, name string, now time.Time) error {
	return st.Update(ctx, func(tx store.Tx) error {
		return store.PutJSON(tx.Bucket(nodesBucket), []byte(id), Node{ID: id, Name: name, LastSeen: now.UTC()})
	})
}

func nodeExists(ctx context.Context, st store.Store, id string) (bool, error) {
	ok := false
	err := st.View(ctx, func(tx store.Tx) error {
		ok = tx.Bucket(nodesBucket).Get([]byte(id)) != nil
		return nil
	})
	return ok, err
}

// Nodes lists the nodes that have run on this store.
func (s *Server) Nodes(ctx context.Context) ([]Node, error) {
	var out []Node
	err := s.st.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		return tx.Bucket(nodesBucket).ForEach(nil, func(_, v []byte) error {
			var n Node
			if err := json.Unmarshal(v, &n); err != nil {
				return err
			}
			out = append(out, n)
			return nil
		})
	})
	return out, err
}
