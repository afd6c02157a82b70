package etcdlocks

import (
	"net/url"
	"strings"
	"time"
)

// What a hold keeps in etcd: one key per hold in its line, in the key's
// directory,
//
//	PREFIX/LOCK/KEY/LEASE.SEQ
//
// LOCK and KEY path-escaped (so a "/" in either never makes one
// directory a prefix of another's), LEASE the hex id of the session's
// etcd lease the key is attached to, SEQ a number of the Store's, so
// that each hold has a key of its own, even two of one session on one
// key. The key's create revision is its place in the line and, once it
// holds, its fence. Its value is what the next in line reads:
//
//	waiting
//	held 2026-11-30T15:03:00.123456789Z
//	held 2026-11-30T15:03:00.123456789Z until 2026-11-30T15:05:00.123456789Z
//
// the grant's wall-clock time and, with a maxHold, the deadline past
// which the next in line may revoke it. A holder writes its record once
// it knows it is first; a waiter's stays "waiting" until then.
const waitingValue = "waiting"

// dir returns the directory of key text of lock under prefix p (which
// ends with "/").
func dir(p, lock, text string) string {
	return p + url.PathEscape(lock) + "/" + url.PathEscape(text) + "/"
}

// heldValue returns the record of a holder granted at granted, with its
// deadline unless it is zero.
func heldValue(granted, deadline time.Time) string {
	v := "held " + granted.UTC().Format(time.RFC3339Nano)
	if !deadline.IsZero() {
		v += " until " + deadline.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// record is a hold's key's value, read.
type record struct {
	held     bool
	granted  time.Time // zero if not held, or unreadable
	deadline time.Time // zero without a maxHold
}

// parseRecord reads a hold's value. A value it cannot read counts as a
// holder without a deadline: never revoked by a reader that does not
// understand it.
func parseRecord(v []byte) record {
	s := string(v)
	if s == waitingValue {
		return record{}
	}
	r := record{held: true}
	s, ok := strings.CutPrefix(s, "held ")
	if !ok {
		return r
	}
	g, d, hasDeadline := strings.Cut(s, " until ")
	if t, err := time.Parse(time.RFC3339Nano, g); err == nil {
		r.granted = t
	}
	if hasDeadline {
		if t, err := time.Parse(time.RFC3339Nano, d); err == nil {
			r.deadline = t
		}
	}
	return r
}

// revocableAt returns when a reader may revoke the holder of r: its
// deadline plus the clocks' skew, on the reader's wall clock; the zero
// Time when never (a waiter, or a holder without a deadline).
func (r record) revocableAt(skew time.Duration) time.Time {
	if !r.held || r.deadline.IsZero() {
		return time.Time{}
	}
	return r.deadline.Add(skew)
}

// heldFor returns how long the holder of r had held its key at now (wall
// clock), 0 if unknown or in the future.
func (r record) heldFor(now time.Time) time.Duration {
	if r.granted.IsZero() {
		return 0
	}
	return max(now.Sub(r.granted), 0)
}
