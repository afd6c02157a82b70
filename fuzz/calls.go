package fuzz

import (
	"fmt"
	"math"
	"time"
)

// The model's vocabulary: calls, where they stand, how they end.

// Never is the instant of a deadline that never fires.
const Never = time.Duration(math.MaxInt64)

// Res is how a call of Hold or TryHold ended, or Running while it has not.
type Res uint8

const (
	Running     Res = iota // not ended: waiting, holding, or revoked while fn runs
	OK                     // fn ran and returned nil; Hold returned nil
	FnErr                  // Hold returned fn's own error
	FnCanceled             // fn returned its context's error (the caller's context ended), Hold passed it on
	NotAcquired            // TryHold answered (false, nil)
	Invalid                // *locks.Error of kind Invalid
	InUse                  // ... InUse
	Lost                   // ... Lost
	Limit                  // ... Limit
	Closed                 // ... Closed
	Canceled               // ... Canceled: the caller's context ended before fn ran
	Panicked               // fn panicked; the panic came out of Hold
	Goexited               // fn called runtime.Goexit
)

var resNames = [...]string{"running", "ok", "fn error", "fn canceled", "not acquired",
	"invalid", "in use", "lost", "limit", "closed", "canceled", "panicked", "goexit"}

func (r Res) String() string {
	if int(r) < len(resNames) {
		return resNames[r]
	}
	return fmt.Sprintf("Res(%d)", r)
}

// Wrap is what a Lost error wraps: what fn returned.
type Wrap uint8

const (
	WrapNone  Wrap = iota // fn returned nil
	WrapFnErr             // fn returned its own error
	WrapCtx               // fn returned its context's error, having seen the loss
	WrapAny               // either, when fn saw its release and its loss at once
)

// Outcome is how a call ended.
type Outcome struct {
	Res  Res
	Wrap Wrap // Lost only
}

func (o Outcome) String() string {
	if o.Res != Lost {
		return o.Res.String()
	}
	return o.Res.String() + [...]string{"", "(fn error)", "(ctx error)", "(any)"}[o.Wrap]
}

// Match reports whether a store's outcome matches the model's o.
func (o Outcome) Match(got Outcome) bool {
	if o.Res != got.Res {
		return false
	}
	return o.Res != Lost || o.Wrap == WrapAny || o.Wrap == got.Wrap
}

// Phase is where a call stands.
type Phase uint8

const (
	Waiting Phase = iota + 1 // in its key's line
	Holding                  // the key's holder
	Revoked                  // lost the key while its fn still runs
	Done                     // Hold returned (or its goroutine ended)
	// Unseen is a real call's phase only: its fn runs, and its caller's
	// context ended first, so fn's context answers the caller's outcome,
	// which a later loss does not change (no exported method of the
	// context says more): Holding or Revoked, which its end will tell.
	Unseen
)

func (p Phase) String() string {
	return [...]string{"?", "waiting", "holding", "revoked", "done", "holding or revoked"}[p]
}

// Key is a key of a store: a lock name and a key text.
type Key struct{ Lock, Text string }

func (k Key) String() string { return k.Lock + "/" + k.Text }

// Call is one call of Hold or TryHold, as the model sees it.
type Call struct {
	ID      int
	Key     Key
	Try     bool
	Obey    bool          // fn returns as soon as its context ends
	FnErr   bool          // fn returns its own error when let go
	MaxHold time.Duration // effective; 0: off

	Phase   Phase
	Waited  bool // stood in its key's line
	Called  time.Duration
	WaitAt  time.Duration // when its wait fires while Waiting; Never otherwise
	HoldAt  time.Duration // when its maxHold fires while Holding; Never otherwise
	Granted time.Duration // valid when Fence > 0
	Fence   uint64        // the model's fence: 1, 2, ... per key; 0: never granted
	Ended   time.Duration // valid when Done
	Out     Outcome

	CallerCanceled bool   // the caller's context ended
	Reason         string // why the lease was lost: "maxHold" or "closed"
	Nested         [2]Res // what Hold and TryHold of the same key answered inside fn
	NestedAsked    bool
}

// FnCtxDone reports whether the context fn runs under has ended.
func (c *Call) FnCtxDone() bool { return c.Phase == Revoked || c.CallerCanceled }

// Request is a call of Hold or TryHold to make.
type Request struct {
	Key         Key
	InvalidKey  bool
	Try         bool
	Wait        time.Duration // effective (the hold's, or its lock's); negative: invalid
	MaxHold     time.Duration // effective; 0: off; negative: invalid
	Obey, FnErr bool
	PreCanceled bool // the caller's context ended before the call
}

// How says how fn ends when told to.
type How uint8

const (
	Return How = iota
	Panic
	Goexit
)

// Resolver settles what the model cannot know alone: which of several
// orders the store took for events that fell on one instant, or raced. The
// model offers the legal choices and asks what the store did.
type Resolver interface {
	// GrantedAt reports whether the store gave c its key at instant t.
	GrantedAt(c *Call, t time.Duration) bool
	// LostRace reports whether c, let go at the instant of its maxHold,
	// was revoked first.
	LostRace(c *Call) bool
	// Ran reports whether c's function ran.
	Ran(c *Call) bool
}
