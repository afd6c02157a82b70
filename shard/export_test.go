package shard

// FreeLenLocked returns how many freed entries the shard keeps for reuse.
func (s *Shard[H, T]) FreeLenLocked() int { return int(s.nfree) }

// BucketsLocked returns how many buckets the shard has.
func (s *Shard[H, T]) BucketsLocked() int { return len(s.buckets) }

const KeepFree, ShrinkAt, MinBuckets = keepFree, shrinkAt, minBuckets
