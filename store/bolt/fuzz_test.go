package bolt_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

// A fuzzOp is one step of FuzzBucketOps.
type fuzzOp struct {
	kind  byte // see decodeOps
	key   []byte
	value []byte
}

// fuzzTx is a group of operations run in one Update; abort makes its
// function fail so that none of it is kept.
type fuzzTx struct {
	ops   []fuzzOp
	abort bool
}

// decodeOps reads data as a list of transactions. Each operation is one
// byte (the low 3 bits pick it) followed by its arguments:
//
//	0, 1  put key value    2  delete key    3  get key
//	4     forEach prefix   5  cursor walk from key
//	6     commit: end the transaction    7  abort: end it with an error
//
// Keys are 1 to 3 bytes (a prefix 0 to 2) from a four-letter alphabet that
// includes 0x00 and 0xff, so that keys collide and share prefixes; a value
// is a length byte (0 to 7) and up to that many bytes.
func decodeOps(data []byte) []fuzzTx {
	alphabet := []byte{0x00, 'a', 'b', 0xff}
	pos := 0
	next := func() byte {
		if pos >= len(data) {
			return 0
		}
		pos++
		return data[pos-1]
	}
	key := func(minLen int) []byte {
		n := minLen + int(next()%3)
		k := make([]byte, n)
		for i := range k {
			k[i] = alphabet[next()%4]
		}
		return k
	}
	var txs []fuzzTx
	var cur fuzzTx
	for pos < len(data) {
		op := fuzzOp{kind: next() % 8}
		switch op.kind {
		case 0, 1:
			op.key = key(1)
			op.value = make([]byte, 0, 8)
			for range next() % 8 {
				op.value = append(op.value, next())
			}
		case 2, 3, 5:
			op.key = key(1)
		case 4:
			op.key = key(0)
		case 6, 7:
			cur.abort = op.kind == 7
			txs = append(txs, cur)
			cur = fuzzTx{}
			continue
		}
		cur.ops = append(cur.ops, op)
	}
	return append(txs, cur)
}

type kv struct{ k, v string }

func (p kv) String() string { return fmt.Sprintf("%x=%x", p.k, p.v) }

// modelWalk returns model's pairs with prefix, in key order.
func modelWalk(model map[string]string, prefix []byte) []kv {
	var out []kv
	for _, k := range slices.Sorted(maps.Keys(model)) {
		if strings.HasPrefix(k, string(prefix)) {
			out = append(out, kv{k, model[k]})
		}
	}
	return out
}

// modelCursor walks model as Seek(key), Prev, Next, Next would.
func modelCursor(model map[string]string, key []byte) []string {
	keys := slices.Sorted(maps.Keys(model))
	i, _ := slices.BinarySearch(keys, string(key))
	at := func(j int) string {
		if j < 0 || j >= len(keys) {
			return "<nil>"
		}
		return fmt.Sprintf("%x", keys[j])
	}
	if i == len(keys) {
		return []string{"<nil>"}
	}
	out := []string{at(i), at(i - 1)}
	if i == 0 {
		return out
	}
	return append(out, at(i), at(i+1))
}

func storeCursor(b store.Bucket, key []byte) []string {
	c := b.Cursor()
	show := func(k, _ []byte) string {
		if k == nil {
			return "<nil>"
		}
		return fmt.Sprintf("%x", k)
	}
	out := []string{show(c.Seek(key))}
	if out[0] == "<nil>" {
		return out
	}
	out = append(out, show(c.Prev()))
	if out[1] == "<nil>" {
		return out
	}
	return append(out, show(c.Next()), show(c.Next()))
}

var errFuzzAbort = errors.New("abort")

// FuzzBucketOps runs random operations against the store and a map, and
// checks that they agree.
func FuzzBucketOps(f *testing.F) {
	// Seeds are in testdata/fuzz/FuzzBucketOps.
	db := bolt.OpenForTest(f, filepath.Join(f.TempDir(), "fuzz.db"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := db.Update(t.Context(), func(tx store.Tx) error { return tx.DeleteBucket("f") }); err != nil {
			t.Fatal(err)
		}
		model := map[string]string{}
		for i, ftx := range decodeOps(data) {
			var next map[string]string
			err := db.Update(t.Context(), func(tx store.Tx) error {
				// Work on a copy: this function may run more than once.
				m := maps.Clone(model)
				b := tx.Bucket("f")
				for j, op := range ftx.ops {
					where := fmt.Sprintf("tx %d op %d (%d %x %x)", i, j, op.kind, op.key, op.value)
					switch op.kind {
					case 0, 1:
						if err := b.Put(op.key, op.value); err != nil {
							return fmt.Errorf("%s: put: %w", where, err)
						}
						m[string(op.key)] = string(op.value)
					case 2:
						if err := b.Delete(op.key); err != nil {
							return fmt.Errorf("%s: delete: %w", where, err)
						}
						delete(m, string(op.key))
					case 3:
						got := b.Get(op.key)
						want, ok := m[string(op.key)]
						if (got != nil) != ok || string(got) != want {
							t.Errorf("%s: get = %x, want %x (present %v)", where, got, want, ok)
						}
					case 4:
						var got []kv
						if err := b.ForEach(op.key, func(k, v []byte) error {
							got = append(got, kv{string(k), string(v)})
							return nil
						}); err != nil {
							return fmt.Errorf("%s: forEach: %w", where, err)
						}
						if want := modelWalk(m, op.key); !slices.Equal(got, want) {
							t.Errorf("%s: forEach = %v, want %v", where, got, want)
						}
					case 5:
						if got, want := storeCursor(b, op.key), modelCursor(m, op.key); !slices.Equal(got, want) {
							t.Errorf("%s: cursor = %v, want %v", where, got, want)
						}
					}
				}
				next = m
				if ftx.abort {
					return errFuzzAbort
				}
				return nil
			})
			switch {
			case ftx.abort && err != errFuzzAbort:
				t.Fatalf("tx %d: aborted Update = %v", i, err)
			case !ftx.abort && err != nil:
				t.Fatalf("tx %d: %v", i, err)
			case !ftx.abort:
				model = next
			}
		}
		if err := db.View(t.Context(), func(tx store.Tx) error {
			var got []kv
			_ = tx.Bucket("f").ForEach(nil, func(k, v []byte) error {
				if !bytes.Equal(tx.Bucket("f").Get(k), v) {
					t.Errorf("Get(%x) differs from ForEach", k)
				}
				got = append(got, kv{string(k), string(v)})
				return nil
			})
			if want := modelWalk(model, nil); !slices.Equal(got, want) {
				t.Errorf("committed state = %v, want %v", got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}
