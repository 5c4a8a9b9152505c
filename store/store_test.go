package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

func TestUint64Key(t *testing.T) {
	nums := []uint64{0, 1, 2, 255, 256, 1 << 32, math.MaxUint64 - 1, math.MaxUint64}
	for i, n := range nums {
		k := store.Uint64Key(n)
		if len(k) != 8 || store.KeyUint64(k) != n {
			t.Errorf("KeyUint64(Uint64Key(%d)) = %d (key %x)", n, store.KeyUint64(k), k)
		}
		if i > 0 && bytes.Compare(store.Uint64Key(nums[i-1]), k) >= 0 {
			t.Errorf("Uint64Key(%d) does not sort before Uint64Key(%d)", nums[i-1], n)
		}
	}
	for _, k := range [][]byte{nil, {}, {1}, make([]byte, 7), make([]byte, 9)} {
		if n := store.KeyUint64(k); n != 0 {
			t.Errorf("KeyUint64(%x) = %d, want 0", k, n)
		}
	}
}

func TestHasPrefix(t *testing.T) {
	for _, tc := range []struct {
		k, prefix []byte
		want      bool
	}{
		{nil, nil, false}, // a nil key is the end of a cursor walk
		{nil, []byte("a"), false},
		{[]byte{}, nil, true},
		{[]byte("ab"), nil, true},
		{[]byte("ab"), []byte("a"), true},
		{[]byte("ab"), []byte("ab"), true},
		{[]byte("ab"), []byte("abc"), false},
		{[]byte{0xff, 0}, []byte{0xff}, true},
	} {
		if got := store.HasPrefix(tc.k, tc.prefix); got != tc.want {
			t.Errorf("HasPrefix(%q, %q) = %v, want %v", tc.k, tc.prefix, got, tc.want)
		}
	}
}

func TestJSONErrors(t *testing.T) {
	s := storetest.Open(t)
	err := s.Update(t.Context(), func(tx store.Tx) error {
		b := tx.Bucket("j")
		if err := b.Put([]byte("bad"), []byte("[1,")); err != nil {
			return err
		}
		var v map[string]any
		if err := store.GetJSON(b, []byte("bad"), &v); err == nil || errors.Is(err, store.ErrNotFound) || !bytes.Contains([]byte(err.Error()), []byte(`"bad"`)) {
			t.Errorf("GetJSON(bad) = %v, want a decode error naming the key", err)
		}
		if err := store.PutJSON(b, []byte("f"), func() {}); err == nil {
			t.Error("PutJSON(func) = nil, want an encode error")
		}
		if v := b.Get([]byte("f")); v != nil {
			t.Errorf("PutJSON stored %q despite the error", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestConfigRevisionOrder(t *testing.T) {
	s := storetest.Open(t)
	var got []uint64
	for range 3 {
		var n uint64
		if err := s.Update(t.Context(), func(tx store.Tx) error {
			var err error
			n, err = store.BumpConfigRevision(tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	if !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("revisions = %v, want [1 2 3]", got)
	}
}

func TestDeleteWhere(t *testing.T) {
	st := storetest.Open(t)
	var n int
	err := st.Update(t.Context(), func(tx store.Tx) error {
		b := tx.Bucket("b")
		for _, k := range []string{"a/1", "a/2", "a/3", "b/1"} {
			if err := b.Put([]byte(k), []byte(k[len(k)-1:])); err != nil {
				return err
			}
		}
		var err error
		n, err = store.DeleteWhere(b, []byte("a/"), func(_, v []byte) bool { return string(v) != "2" })
		return err
	})
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	var left []string
	_ = st.View(t.Context(), func(tx store.Tx) error {
		return tx.Bucket("b").ForEach(nil, func(k, _ []byte) error { left = append(left, string(k)); return nil })
	})
	if !slices.Equal(left, []string{"a/2", "b/1"}) {
		t.Fatalf("left %v", left)
	}
}

// TestRunAlso: hooks run in order in the writer's transaction, nil ones
// are skipped, and the first error stops them and rolls the write back.
func TestRunAlso(t *testing.T) {
	st := storetest.Open(t)
	var ran []string
	hook := func(name string, err error) func(store.Tx) error {
		return func(tx store.Tx) error {
			ran = append(ran, name)
			if err != nil {
				return err
			}
			return tx.Bucket("also").Put([]byte(name), []byte("1"))
		}
	}
	boom := errors.New("boom")
	err := st.Update(t.Context(), func(tx store.Tx) error {
		ran = ran[:0]
		return store.RunAlso(tx, []func(store.Tx) error{hook("a", nil), nil, hook("b", boom), hook("c", nil)})
	})
	if !errors.Is(err, boom) || fmt.Sprint(ran) != "[a b]" {
		t.Fatalf("err %v, ran %v", err, ran)
	}
	if err := st.View(t.Context(), func(tx store.Tx) error {
		if tx.Bucket("also").Get([]byte("a")) != nil {
			t.Error("a hook's write survived the rollback")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
