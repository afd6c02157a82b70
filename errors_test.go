package locks_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestKindString: each kind's name, as it ends an error's message.
func TestKindString(t *testing.T) {
	for k, want := range map[locks.Kind]string{
		locks.Invalid:  "invalid",
		locks.InUse:    "in use",
		locks.Lost:     "lost",
		locks.Limit:    "limit",
		locks.Closed:   "closed",
		locks.Canceled: "canceled",
		0:              "Kind(0)",
	} {
		require.Equal(t, want, k.String())
	}
}

// TestErrorIsMatchesOnlyItsKind: errors.Is matches an *Error with its own
// kind's sentinel and no other, also through wrapping; a Canceled one,
// which has none, matches none.
func TestErrorIsMatchesOnlyItsKind(t *testing.T) {
	sentinels := map[locks.Kind]error{
		locks.Invalid: locks.ErrInvalid,
		locks.InUse:   locks.ErrInUse,
		locks.Lost:    locks.ErrLost,
		locks.Limit:   locks.ErrLimit,
		locks.Closed:  locks.ErrClosed,
	}
	for _, k := range []locks.Kind{locks.Invalid, locks.InUse, locks.Lost, locks.Limit, locks.Closed, locks.Canceled} {
		err := fmt.Errorf("charging: %w", &locks.Error{Kind: k, Lock: name, Key: "9"})
		for other, s := range sentinels {
			require.Equal(t, k == other, errors.Is(err, s), "errors.Is(%v error, %v)", k, s)
		}
		e := asError(t, err)
		require.Equal(t, k, e.Kind)
		require.Equal(t, name, e.Lock)
		require.Equal(t, "9", e.Key)
	}
}

// messageForm is the form of every message: the lock, the key, what
// happened in words, and the kind (or, when lost, the reason).
var messageForm = regexp.MustCompile(`^lock invoices: key "9": [a-z][^:]*(: [^:]+)*: (invalid|in use|limit|closed)$`)

// TestErrorKinds: every kind, made by a real call, matches its sentinel,
// gives its kind, lock and key through errors.As, and reads
// `lock NAME: key "KEY": what happened`. Two messages are fixed to the
// letter, in use past a wait and lost at maxHold; the others only in form.
// (Limit has its own test: TestLimit.)
func TestErrorKinds(t *testing.T) {
	// whileHeld makes the error of a Hold of key, with opts, while 9 is held.
	whileHeld := func(key any, opts ...locks.Option) func(t *testing.T) error {
		return func(t *testing.T) error {
			_, l := newLock(t)
			h := holding(t, l, 9)
			defer h.finish()
			return l.Hold(context.Background(), key, mustNotRun(t), opts...)
		}
	}
	cases := []struct {
		name     string
		kind     locks.Kind
		sentinel error
		exact    string // "" where only the form is fixed
		make     func(t *testing.T) error
	}{
		{
			name: "invalid option", kind: locks.Invalid, sentinel: locks.ErrInvalid,
			make: func(t *testing.T) error {
				_, l := newLock(t)
				return l.Hold(context.Background(), 9, mustNotRun(t), locks.TTL(time.Second))
			},
		},
		{
			name: "invalid in a transaction", kind: locks.Invalid, sentinel: locks.ErrInvalid,
			make: func(t *testing.T) error {
				_, l := newLock(t)
				return l.Hold(locks.InTransaction(context.Background()), 9, mustNotRun(t))
			},
		},
		{
			name: "invalid inside a hold of the key", kind: locks.Invalid, sentinel: locks.ErrInvalid,
			make: func(t *testing.T) error {
				_, l := newLock(t)
				var inner error
				require.NoError(t, l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
					inner = l.Hold(ctx, "9", mustNotRun(t))
					return nil
				}))
				return inner
			},
		},
		{
			name: "in use, Wait(0)", kind: locks.InUse, sentinel: locks.ErrInUse,
			exact: `lock invoices: key "9": held past the hold's wait: in use`,
			make:  whileHeld(InvoiceID("9"), locks.Wait(0)),
		},
		{
			name: "in use, past the wait", kind: locks.InUse, sentinel: locks.ErrInUse,
			exact: `lock invoices: key "9": held past the hold's wait: in use`,
			make:  whileHeld(9, locks.Wait(time.Second)),
		},
		{
			name: "lost at maxHold", kind: locks.Lost, sentinel: locks.ErrLost,
			exact: `lock invoices: key "9": the lease was lost: it was revoked at its maxHold`,
			make: func(t *testing.T) error {
				_, l := newLock(t)
				return l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
					<-ctx.Done()
					return nil
				}, locks.MaxHold(time.Minute))
			},
		},
		{
			name: "lost when its store closed", kind: locks.Lost, sentinel: locks.ErrLost,
			exact: `lock invoices: key "9": the lease was lost: its store closed`,
			make: func(t *testing.T) error {
				st, l := newLock(t)
				return l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
					st.Close()
					<-ctx.Done()
					return nil
				})
			},
		},
		{
			name: "closed, waiting", kind: locks.Closed, sentinel: locks.ErrClosed,
			make: func(t *testing.T) error {
				st, l := newLock(t)
				h := holding(t, l, 9)
				w := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
				st.Close()
				require.ErrorIs(t, h.finish(), locks.ErrLost)
				return w.wait()
			},
		},
		{
			name: "closed, called after Close", kind: locks.Closed, sentinel: locks.ErrClosed,
			make: func(t *testing.T) error {
				st, l := newLock(t)
				st.Close()
				return l.Hold(context.Background(), 9, mustNotRun(t))
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				err := c.make(t)
				requireKind(t, err, c.sentinel, c.kind, name, "9")
				if c.exact != "" {
					require.EqualError(t, err, c.exact)
				}
				if c.kind != locks.Lost {
					require.Regexp(t, messageForm, err.Error())
				}
			})
		})
	}
}

// TestErrorWithoutKey: an error where no key is involved names the lock
// and no key: Key is "" there.
func TestErrorWithoutKey(t *testing.T) {
	st := newStore(t)
	_, err := locks.OpenLock(st, name, locks.TTL(0))
	requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, "")
	require.Regexp(t, `^lock invoices: [a-z][^"]*: invalid$`, err.Error())

	st.Close()
	_, err = locks.OpenLock(st, name)
	requireKind(t, err, locks.ErrClosed, locks.Closed, name, "")
	require.Regexp(t, `^lock invoices: [a-z][^"]*: closed$`, err.Error())
}
