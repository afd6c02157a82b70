package locks

import (
	"math/rand/v2"
	"runtime/pprof"
	"sync"
)

// HoldsProfile is the name of the pprof profile in which stores made with
// ProfileHolds record their holds and waits (see ProfileHolds).
const HoldsProfile = "holdline.locks.holds"

// holdsProfile is the one profile of the process, made on first use:
// pprof profiles are process-wide, by name.
var holdsProfile = sync.OnceValue(func() *pprof.Profile {
	if p := pprof.Lookup(HoldsProfile); p != nil {
		return p
	}
	return pprof.NewProfile(HoldsProfile)
})

// profiled is an entry of the holds profile: a pointer of its own, since
// the profile keys its entries by value.
type profiled struct{ _ byte }

// profileHold records a hold in the profile if s samples it, with the
// stack from profileHold's caller up, and returns the
// entry to remove when the hold is over (nil if not recorded). When the
// profile is off it costs one comparison, inlined.
func (s *store) profileHold() *profiled {
	if s.profile == 0 {
		return nil
	}
	return s.sampleHold()
}

// sampleHold is profileHold with the profile on.
func (s *store) sampleHold() *profiled {
	if n := s.profile; n > 1 && rand.IntN(n) != 0 {
		return nil
	}
	p := new(profiled)
	holdsProfile().Add(p, 3) // the stack starts at profileHold's caller (Add's own frame counts)
	return p
}

// unprofile removes p from the profile, if it was recorded.
func unprofile(p *profiled) {
	if p != nil {
		holdsProfile().Remove(p)
	}
}
