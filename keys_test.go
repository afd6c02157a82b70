package locks_test

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// Named types whose underlying type is an integer, a string or a []byte.
type (
	orderNo  int16
	seqNo    uint32
	rawKey   []byte
	tenantID string
	digit    [1]byte
)

// A byte type of its own: a slice or array of it is not a []byte or a
// [N]byte (SPEC §2 names those underlying types only).
type (
	octet      uint8
	octets     []octet
	octetArray [1]octet
)

// Keys whose identity is their MarshalText (a uuid.UUID is one: a [16]byte
// whose text is its canonical 36 characters).
type (
	text9     struct{}
	badText   struct{}
	emptyText struct{}
	ptrText   struct{}
)

func (text9) MarshalText() ([]byte, error)     { return []byte("9"), nil }
func (badText) MarshalText() ([]byte, error)   { return nil, fmt.Errorf("no text today") }
func (emptyText) MarshalText() ([]byte, error) { return []byte{}, nil }
func (*ptrText) MarshalText() ([]byte, error)  { return []byte("9"), nil }

// TestKeyIdentity: a key's identity is its text, whatever its type.
// While 9 is held, every spelling of 9 is held; the lease names the text.
func TestKeyIdentity(t *testing.T) {
	_, l := newLock(t)
	spellings := []struct {
		name string
		key  any
	}{
		{"int", 9},
		{"int8", int8(9)},
		{"int16", int16(9)},
		{"int32", int32(9)},
		{"int64", int64(9)},
		{"uint", uint(9)},
		{"uint8", uint8(9)},
		{"uint16", uint16(9)},
		{"uint32", uint32(9)},
		{"uint64", uint64(9)},
		{"string", "9"},
		{"[]byte", []byte("9")},
		{"named string", InvoiceID("9")},
		{"named int16", orderNo(9)},
		{"named uint32", seqNo(9)},
		{"named []byte", rawKey("9")},
		{"named string 2", tenantID("9")},
		{"[1]byte", [1]byte{'9'}},
		{"named [1]byte", digit{'9'}},
		{"TextMarshaler", text9{}},
		{"*T TextMarshaler", &ptrText{}},
		{"*big.Int", big.NewInt(9)},
	}
	for _, holder := range spellings {
		t.Run("held as "+holder.name, func(t *testing.T) {
			h := holding(t, l, holder.key)
			require.Equal(t, name, h.lease.Lock)
			require.Equal(t, "9", h.lease.Key)
			for _, other := range spellings {
				requireHeld(t, l, other.key, "TryHold(%s) while %s is held", other.name, holder.name)
			}
			require.NoError(t, h.finish())
			requireFree(t, l, holder.key, "the key is free again once its holder returned")
		})
	}
}

// TestIntegerKeysText: an integer key's text is its decimal form, negative
// and extreme values included, so int8(-9) and "-9" are one key.
func TestIntegerKeysText(t *testing.T) {
	_, l := newLock(t)
	cases := []struct {
		key  any
		text string
	}{
		{0, "0"},
		{-9, "-9"},
		{int8(-9), "-9"},
		{orderNo(-9), "-9"},
		{int8(-128), "-128"},
		{int64(-1 << 63), "-9223372036854775808"},
		{uint64(1<<64 - 1), "18446744073709551615"},
		{uint8(255), "255"},
		{"007", "007"}, // text is taken as it is: not the integer 7
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%T(%v)", c.key, c.key), func(t *testing.T) {
			var got string
			require.NoError(t, l.Hold(context.Background(), c.key, func(_ context.Context, ls *locks.Lease) error {
				got = ls.Key
				requireHeld(t, l, c.text, "the text %q is the same key", c.text)
				return nil
			}))
			require.Equal(t, c.text, got)
		})
	}
	// "007" and 7 are two keys.
	require.NoError(t, l.Hold(context.Background(), "007", func(context.Context, *locks.Lease) error {
		requireFree(t, l, 7)
		return nil
	}))
}

// TestByteKeyIsCopied: a []byte key is taken by its text at the call;
// changing the slice afterwards changes neither the lease nor the key held.
func TestByteKeyIsCopied(t *testing.T) {
	_, l := newLock(t)
	b := []byte("abc")
	require.NoError(t, l.Hold(context.Background(), b, func(_ context.Context, ls *locks.Lease) error {
		copy(b, "xyz")
		require.Equal(t, "abc", ls.Key)
		requireHeld(t, l, "abc")
		requireFree(t, l, "xyz")
		return nil
	}))
}

// TestKeyLength: text keys are 1 to 1024 bytes.
func TestKeyLength(t *testing.T) {
	_, l := newLock(t)
	for _, n := range []int{1, 2, 1023, 1024} {
		for _, key := range []any{strings.Repeat("k", n), []byte(strings.Repeat("k", n)), InvoiceID(strings.Repeat("k", n))} {
			var got string
			err := l.Hold(context.Background(), key, func(_ context.Context, ls *locks.Lease) error {
				got = ls.Key
				return nil
			})
			require.NoError(t, err, "%T of %d bytes", key, n)
			require.Len(t, got, n)
		}
	}
	// Multi-byte text counts its bytes: 512 two-byte runes are 1024 bytes.
	require.NoError(t, l.Hold(context.Background(), strings.Repeat("é", 512), nop))
	err := l.Hold(context.Background(), strings.Repeat("é", 512)+"x", nop)
	requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, "")
}

// TestInvalidKeys: nil, floats, structs and other kinds, empty and longer
// text are invalid. The call fails at once, names the lock (and the key's
// type, but for string and []byte keys), runs nothing and uses no fence:
// the key, held or free, stays as it was.
func TestInvalidKeys(t *testing.T) {
	type point struct{ X, Y int }
	long := strings.Repeat("k", locks.MaxKeyLen+1)
	cases := []struct {
		name string
		key  any
	}{
		{"nil", nil},
		{"float64", 9.0},
		{"float32", float32(9)},
		{"complex", complex(9, 0)},
		{"bool", true},
		{"struct", point{1, 2}},
		{"empty struct", struct{}{}},
		{"pointer", new(int)},
		{"nil pointer", (*string)(nil)},
		{"[]int", []int{9}},
		{"[]string", []string{"9"}},
		{"[1]int", [1]int{9}},
		{"empty [0]byte", [0]byte{}},
		{"failing MarshalText", badText{}},
		{"empty MarshalText", emptyText{}},
		{"nil TextMarshaler", (*ptrText)(nil)},
		{"nil *big.Int", (*big.Int)(nil)},
		{"[]octet", octets("9")},
		{"[1]octet", octetArray{'9'}},
		{"map", map[string]int{"9": 9}},
		{"func", func() {}},
		{"chan", make(chan int)},
		{"error", fmt.Errorf("9")},
		{"empty string", ""},
		{"empty named string", InvoiceID("")},
		{"empty []byte", []byte{}},
		{"nil []byte", []byte(nil)},
		{"1025-byte string", long},
		{"1025-byte []byte", []byte(long)},
		{"1025-byte named string", InvoiceID(long)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, l := newLock(t, locks.Shards(1))
			before := fenceOf(t, l, "other")

			err := l.Hold(context.Background(), c.key, mustNotRun(t))
			require.Error(t, err)
			require.ErrorIs(t, err, locks.ErrInvalid)
			e := asError(t, err)
			require.Equal(t, locks.Invalid, e.Kind)
			require.Equal(t, name, e.Lock)
			require.True(t, strings.HasPrefix(err.Error(), "lock invoices: "), "message %q", err)
			require.True(t, strings.HasSuffix(err.Error(), ": invalid"), "message %q", err)
			switch c.key.(type) {
			case nil, string, []byte:
			default:
				require.Contains(t, err.Error(), fmt.Sprintf("%T", c.key), "the message names the key's type (SPEC §2)")
			}

			ok, err := l.TryHold(context.Background(), c.key, mustNotRun(t))
			require.False(t, ok)
			requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, e.Key)

			v, err := locks.HoldValue(context.Background(), l, c.key, func(context.Context, *locks.Lease) (int, error) {
				t.Error("HoldValue ran fn for an invalid key")
				return 1, nil
			})
			require.ErrorIs(t, err, locks.ErrInvalid)
			require.Zero(t, v)

			require.Equal(t, before+1, fenceOf(t, l, "other"), "an invalid key used a fence")
		})
	}
}

// TestNames: a name is 1 to 128 characters of A-Z a-z 0-9 _ - . : /;
// Name returns it.
func TestNames(t *testing.T) {
	st := newStore(t)
	valid := []string{
		"a", "Z", "0", "_", "-", ".", ":", "/",
		"invoices", "billing/invoices:v2", "A-Z_a-z.0-9",
		strings.Repeat("n", 128),
		strings.Repeat("ab/", 42) + "cd",
	}
	for _, n := range valid {
		l, err := locks.OpenLock(st, n)
		require.NoError(t, err, "name %q", n)
		require.Equal(t, n, l.Name())
		require.NoError(t, l.Hold(context.Background(), 1, func(_ context.Context, ls *locks.Lease) error {
			require.Equal(t, n, ls.Lock)
			return nil
		}))
	}

	invalid := []string{"", strings.Repeat("n", 129), strings.Repeat("n", 1000), "é", "invoicé", "in voices", "Ω"}
	for c := 0; c < 256; c++ {
		b := byte(c)
		if 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("_-.:/", b) >= 0 {
			continue
		}
		invalid = append(invalid, string([]byte{b}), "in"+string([]byte{b})+"voices", "invoices"+string([]byte{b}))
	}
	for _, n := range invalid {
		l, err := locks.OpenLock(st, n)
		require.Nil(t, l, "name %q", n)
		require.ErrorIs(t, err, locks.ErrInvalid, "name %q", n)
		e := asError(t, err)
		require.Equal(t, locks.Invalid, e.Kind)
		require.Equal(t, n, e.Lock, "the error names the lock")
		require.Empty(t, e.Key)
	}
	// With no name to quote, the message says whose name is empty.
	_, err := locks.OpenLock(st, "")
	require.EqualError(t, err, "the lock's name is empty: invalid")
}

// TestTwoHandlesShareKeys: two handles of one name share their keys and
// their lines, each with its own defaults; two names never do, even for
// the same key text.
func TestTwoHandlesShareKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t, locks.Shards(1))
		a, b := openLock(t, st, name), openLock(t, st, name, locks.Wait(time.Hour))
		other := openLock(t, st, "receipts")
		h := holding(t, a, 42)

		requireHeld(t, b, 42, "a second handle of the same name shares the key")

		ok, err := other.TryHold(context.Background(), 42, func(_ context.Context, ls *locks.Lease) error {
			require.Equal(t, "receipts", ls.Lock)
			return nil
		})
		require.NoError(t, err)
		require.True(t, ok, "the same key text under another name is another key")
		require.NoError(t, other.Hold(context.Background(), "42", nop, locks.Wait(0)))

		// b's hold stands in a's line, with b's wait, and is granted when
		// a's holder lets go.
		w := queued(t, context.Background(), b, InvoiceID("42"))
		time.Sleep(locks.DefaultWait)
		synctest.Wait()
		require.False(t, isClosed(w.done), "b's own wait, not the default")
		require.NoError(t, h.finish())
		<-w.granted
		require.Greater(t, w.lease.Fence, h.lease.Fence)
		require.NoError(t, w.finish())
		requireFree(t, b, 42)
	})
}

// TestKeysAreIndependent: holding invoice 42 never makes invoice 43 wait,
// even when both fall on one shard, and a line on 42 does not touch 43
// either.
func TestKeysAreIndependent(t *testing.T) {
	_, l := newLock(t, locks.Shards(1))
	h := holding(t, l, 42)
	w := startHold(t, context.Background(), l, 42, locks.Wait(time.Hour))
	for i := 43; i < 143; i++ {
		require.NoError(t, l.Hold(context.Background(), i, nop, locks.Wait(0)), "key %d", i)
		requireFree(t, l, i, "key %d", i)
	}
	require.NoError(t, h.finish())
	require.NoError(t, w.finish())
}

// TestUUIDKeys: a [16]byte type with MarshalText (as uuid.UUID is) is
// held by its text, the canonical 36 characters, not its 16 bytes.
func TestUUIDKeys(t *testing.T) {
	_, l := newLock(t)
	id := uuidKey{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	h := holding(t, l, id)
	require.Equal(t, "6ba7b810-9dad-11d1-80b4-00c04fd430c8", h.lease.Key)
	requireHeld(t, l, "6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	require.NoError(t, h.finish())
}

// TestRejectedKeyNamesItsType: the error for a key of no accepted type
// names the type and says what a key is.
func TestRejectedKeyNamesItsType(t *testing.T) {
	_, l := newLock(t)
	err := l.Hold(context.Background(), 9.5, mustNotRun(t))
	require.EqualError(t, err, "lock invoices: a key is a string, an integer, a []byte, a [N]byte or an encoding.TextMarshaler, not a float64: invalid")
	err = l.Hold(context.Background(), badText{}, mustNotRun(t))
	require.EqualError(t, err, "lock invoices: the key's MarshalText failed (locks_test.badText): no text today: invalid")
}

type uuidKey [16]byte

func (u uuidKey) MarshalText() ([]byte, error) {
	return fmt.Appendf(nil, "%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}
