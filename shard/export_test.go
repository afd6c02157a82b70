package shard

// FreeLenLocked returns how many freed entries the shard keeps for reuse.
func (s *Shard[H, T]) FreeLenLocked() int { return s.nfree }

// PeakLocked returns the most entries the shard's map held since it was
// last made.
func (s *Shard[H, T]) PeakLocked() int { return s.peak }

const KeepFree, ShrinkAt, ShrinkMin = keepFree, shrinkAt, shrinkMin
