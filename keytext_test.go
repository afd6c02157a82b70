package locks_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAllocsHoldStringKey: a string key converted to the key's interface
// at the call allocates nothing (the key does not escape, whatever key
// types the library understands), so a hold of a string key is one
// allocation, fn's context.
func TestAllocsHoldStringKey(t *testing.T) {
	_, l := newLock(t)
	keys := []string{"invoice-1", "invoice-2", "invoice-3", "invoice-4"}
	ctx := context.Background()
	i := 0
	requireAllocs(t, "Hold of a string variable", 1, func() {
		if err := l.Hold(ctx, keys[i%len(keys)], ignoreCtx); err != nil {
			t.Fatal(err)
		}
		i++
	})
}

// ptrKey has MarshalText and is held in an interface's data word itself
// (a struct of one pointer); bigKey holds a pointer among other fields.
type (
	ptrKey struct{ p *int }
	bigKey struct {
		n    uint64
		name *string
	}
)

func (k ptrKey) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "p%d", *k.p), nil }
func (k bigKey) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "%s-%d", *k.name, k.n), nil }

// TestMarshalTextKeysWithPointers: MarshalText keys whose types hold
// pointers are keys too, by their text, however the interface holds them.
func TestMarshalTextKeysWithPointers(t *testing.T) {
	_, l := newLock(t)
	n, name := 7, "acct"
	h := holding(t, l, ptrKey{&n})
	require.Equal(t, "p7", h.lease.Key)
	require.NoError(t, h.finish())
	h = holding(t, l, bigKey{3, &name})
	require.Equal(t, "acct-3", h.lease.Key)
	requireHeld(t, l, "acct-3")
	require.NoError(t, h.finish())
}
