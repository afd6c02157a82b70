package locks_test

import (
	"context"
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

// ptrKey has MarshalText and holds a pointer: its text would have to be
// taken from the caller's own value, which would make every key escape.
type ptrKey struct{ p *int }

func (ptrKey) MarshalText() ([]byte, error) { return []byte("p"), nil }

// TestMarshalTextKeysHoldNoPointers: a MarshalText key whose type holds
// pointers is refused, naming its type and what to do.
func TestMarshalTextKeysHoldNoPointers(t *testing.T) {
	_, l := newLock(t)
	err := l.Hold(context.Background(), ptrKey{}, mustNotRun(t))
	require.EqualError(t, err, "lock invoices: a key whose type has MarshalText must hold no pointers, and a locks_test.ptrKey does: pass its text: invalid")
}
