package eventing

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// countersBucket holds the Counter module's counters: name -> JSON number.
const countersBucket = "eventcounters"

// counterStore keeps the counters of the Counter handler module.
type counterStore struct{ st store.Store }

func readCounter(b store.Bucket, name string) int64 {
	var n int64
	if v := b.Get([]byte(name)); v != nil {
		_ = json.Unmarshal(v, &n)
	}
	return n
}

// add changes counter name by delta (floored at 0 unless negative values
// are allowed), or sets it to 0 when reset, and returns the new value.
func (c *counterStore) add(ctx context.Context, name string, delta int64, allowNegative, reset bool, also ...func(store.Tx) error) (int64, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return 0, apierr.New(apierr.Parameter, "Missing parameter: counter_name")
	}
	var out int64
	err := c.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(countersBucket)
		n := readCounter(b, name) + delta
		if reset {
			n = 0
		}
		if n < 0 && !allowNegative {
			n = 0
		}
		v, err := json.Marshal(n)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(name), v); err != nil {
			return err
		}
		out = n
		return store.RunAlso(tx, also)
	})
	return out, err
}

// Counter returns the value of counter name and whether it exists.
func (s *Service) Counter(ctx context.Context, name string) (int64, bool, error) {
	var n int64
	var ok bool
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		b := tx.Bucket(countersBucket)
		ok = b.Get([]byte(name)) != nil
		n = readCounter(b, name)
		return nil
	})
	return n, ok, err
}

// Counters returns every counter of the Counter handler module.
func (s *Service) Counters(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		clear(out)
		return tx.Bucket(countersBucket).ForEach(nil, func(k, v []byte) error {
			var n int64
			if err := json.Unmarshal(v, &n); err != nil {
				return err
			}
			out[string(k)] = n
			return nil
		})
	})
	return out, err
}

// AddCounter changes counter name by delta as the Counter module does
// (floored at 0 unless allowNegative) and returns the new value.
func (s *Service) AddCounter(ctx context.Context, name string, delta int64, allowNegative bool) (int64, error) {
	return s.counters.add(ctx, name, delta, allowNegative, false)
}

// ResetCounter sets counter name to 0.
func (s *Service) ResetCounter(ctx context.Context, name string) error {
	_, err := s.counters.add(ctx, name, 0, false, true)
	return err
}
