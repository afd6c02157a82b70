package locks

import (
	"errors"
	"math"
	"strconv"
	"time"
)

// Defaults and limits, in one place.
const (
	// DefaultWait bounds a Hold's time in line unless Wait says otherwise:
	// nothing in this package waits forever by accident.
	DefaultWait = 10 * time.Second
	// Forever is the longest wait: Wait(Forever) waits in line as long as
	// it takes, until the key comes or ctx ends.
	Forever time.Duration = math.MaxInt64
	// DefaultTTL is a lease's ttl unless TTL says otherwise.
	DefaultTTL = 10 * time.Second
	// MaxWaiters is the most waiters one key's line holds; the next Hold
	// fails at once with Limit.
	MaxWaiters = 10000
	// MaxKeyLen is the longest key text, in bytes.
	MaxKeyLen = 1024 // at most shard.MaxKeyLen (keys.go checks it)
	// MaxNameLen is the longest lock name, in bytes.
	MaxNameLen = 128
	// DefaultShards is the number of shards of a store unless Shards says
	// otherwise.
	DefaultShards = 256
	// MaxShards is the most shards a store has: Shards asking for more
	// gets this many (about 38 MB of shards on amd64; see Shards).
	MaxShards = 1 << 16
	// DefaultTick is the resolution of a store's timer wheel unless
	// TimerTick says otherwise: deadlines are rounded up to it.
	DefaultTick = time.Millisecond
)

type optionKind uint8

const (
	optTTL optionKind = iota + 1
	optMaxHold
	optWait
)

// Option is a setting of a lock (given to OpenLock, as the default of its
// holds) or of one hold (given to Hold). Make one with TTL, MaxHold or
// Wait. An Option is a small value: passing options allocates nothing.
type Option struct {
	kind optionKind
	d    time.Duration
}

// TTL sets how long a session's lease or wait on this lock lives without
// the session renewing it (see Session). It is given to OpenLock only (a
// Hold or Acquire given it fails Invalid) and must be positive; the
// default is DefaultTTL. Holders that are function calls of this process
// (Hold) renew implicitly while the process lives: a ttl never runs out
// for them.
func TTL(d time.Duration) Option { return Option{optTTL, d} }

// MaxHold bounds every lease from its grant, however it is renewed: at
// Granted+d the lease is revoked, the key goes to the next in line, the
// function's context is cancelled and its Hold fails Lost once the function
// returns. Off unless given; MaxHold(0) turns it off; a negative d is
// Invalid. Given to OpenLock (the lock's default) or to Hold.
func MaxHold(d time.Duration) Option { return Option{optMaxHold, d} }

// Wait bounds a Hold's time in line, counted once from the call: past it,
// Hold fails InUse. Wait(0) means do not wait; a negative d is Invalid;
// any positive d works, up to Forever. The default is DefaultWait.
// Given to OpenLock (the lock's default) or to Hold.
func Wait(d time.Duration) Option { return Option{optWait, d} }

// settings are the effective options of a lock or a hold.
type settings struct {
	ttl     time.Duration
	maxHold time.Duration // 0: off
	wait    time.Duration
	inside  bool // the hold is made inside another (see cycles.go)
}

// apply applies opts to st, or returns what is wrong with the first bad
// one, in words. atHold says the options were given to Hold.
func (st *settings) apply(opts []Option, atHold bool) string {
	if i := st.applyValid(opts, atHold); i >= 0 {
		return badOption(opts[i], atHold)
	}
	return ""
}

// applyValid applies opts to st up to the first bad one, and returns its
// index, or -1 if none is bad. Inlined: a hold applies its options without
// a call.
func (st *settings) applyValid(opts []Option, atHold bool) int {
	for i, o := range opts {
		switch {
		case o.kind == optMaxHold && o.d >= 0:
			st.maxHold = o.d
		case o.kind == optWait && o.d >= 0:
			st.wait = o.d
		case o.kind == optTTL && !atHold && o.d > 0:
			st.ttl = o.d
		default:
			return i
		}
	}
	return -1
}

// badOption says what is wrong with o, an option apply refused.
func badOption(o Option, atHold bool) string {
	switch o.kind {
	case optTTL:
		if atHold {
			return "a ttl is set when the lock is opened, not per hold"
		}
		return "the ttl must be positive, not " + o.d.String()
	case optMaxHold:
		return "the maxHold is negative (" + o.d.String() + ")"
	case optWait:
		return "the wait is negative (" + o.d.String() + ")"
	}
	return "an Option must be made by TTL, MaxHold or Wait"
}

// StoreOption is a setting of a store, given to NewStore.
type StoreOption struct {
	kind   storeOptionKind
	shards int
	tick   time.Duration
}

type storeOptionKind uint8

const (
	optShards storeOptionKind = iota + 1
	optTick
	optProfile
	optTimes
)

// Shards sets the number of shards of the store's key table (rounded up to
// a power of two); the default is DefaultShards. More shards spread the
// keys of many goroutines over more mutexes, at about 576 bytes each on
// amd64: the table's shard (128, its mutex and counts), the store's own
// state of it (384: its deadline lists, and the histograms RecordTimes
// fills) and its first 8 buckets (64). Fewer than 256 still take 256's 32
// KiB of table, so that each shard sits in a cache-line block of its own:
// a store of one shard takes about 40 KiB. At most MaxShards are made. n
// must be positive: NewStore panics otherwise.
func Shards(n int) StoreOption { return StoreOption{kind: optShards, shards: n} }

// TimerTick sets the resolution of the store's timer wheel; the default is
// DefaultTick. Deadlines are rounded up to a whole tick, so none fires
// early; a coarser tick wakes the store less often and fires more
// deadlines at each wake-up. d must be positive: NewStore panics otherwise.
func TimerTick(d time.Duration) StoreOption { return StoreOption{kind: optTick, tick: d} }

// ProfileHolds records one in every `every` Holds, HoldAlls and Acquires of
// the store, from its call until it lets its keys go, in the pprof profile
// named HoldsProfile, with the stack that called it: so that go tool pprof (or
// net/http/pprof's /debug/pprof/holdline.locks.holds) shows who holds and
// waits for keys, and from where. Capturing a stack costs about a
// microsecond, so it is off unless given; every 1 records every hold, 100
// one in a hundred at random. every must be positive: NewStore panics
// otherwise.
func ProfileHolds(every int) StoreOption { return StoreOption{kind: optProfile, shards: every} }

// RecordTimes makes the store count, in Stats' WaitTimes and HoldTimes,
// how long each waiter stood in line before its grant and how long each
// key was held (from the grant until the holder let go, or its function
// returned). It costs a hold one more clock reading and two atomic adds on
// its shard's own counters; off unless given.
func RecordTimes() StoreOption { return StoreOption{kind: optTimes} }

type storeConfig struct {
	shards  int
	tick    time.Duration
	profile int  // record one hold in profile; 0: off
	times   bool // RecordTimes
}

func newStoreConfig(opts []StoreOption) storeConfig {
	c := storeConfig{shards: DefaultShards, tick: DefaultTick}
	for _, o := range opts {
		switch o.kind {
		case optShards:
			if o.shards <= 0 {
				panic("locks: Shards(" + strconv.Itoa(o.shards) + "): the number of shards must be positive")
			}
			c.shards = min(o.shards, MaxShards)
		case optTick:
			if o.tick <= 0 {
				panic("locks: TimerTick(" + o.tick.String() + "): the tick must be positive")
			}
			c.tick = o.tick
		case optProfile:
			if o.shards <= 0 {
				panic("locks: ProfileHolds(" + strconv.Itoa(o.shards) + "): every must be positive")
			}
			c.profile = o.shards
		case optTimes:
			c.times = true
		default:
			panic("locks: a StoreOption must be made by Shards, TimerTick, ProfileHolds or RecordTimes")
		}
	}
	return c
}

// Settings are what Options set: a lock's ttl, and the default maxHold
// and wait of its holds. They are for a Locker of another package (a
// client of a store in another process) that takes the same options.
type Settings struct {
	TTL     time.Duration
	MaxHold time.Duration // 0: off
	Wait    time.Duration
}

// DefaultSettings returns the settings of a lock opened without options.
func DefaultSettings() Settings { return Settings{TTL: DefaultTTL, Wait: DefaultWait} }

// Apply returns s with opts applied in order, or an error saying in words
// what is wrong with the first bad one: the reason of the Invalid *Error
// a *Lock would return. perHold says the options were given to a hold
// (Hold, TryHold, Acquire), where a TTL is refused.
func (s Settings) Apply(perHold bool, opts ...Option) (Settings, error) {
	st := settings{ttl: s.TTL, maxHold: s.MaxHold, wait: s.Wait}
	if why := st.apply(opts, perHold); why != "" {
		return s, errors.New(why)
	}
	return Settings{TTL: st.ttl, MaxHold: st.maxHold, Wait: st.wait}, nil
}
