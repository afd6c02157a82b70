package shard

// FreeLenLocked returns how many freed entries the shard keeps for reuse.
func (s *Shard[H, T]) FreeLenLocked() int { return int(s.nfree) }

// BucketsLocked returns how many buckets the shard has.
func (s *Shard[H, T]) BucketsLocked() int { return len(s.buckets) }

const KeepFree, ShrinkAt, MinBuckets = keepFree, shrinkAt, minBuckets

// ChainLocked returns the entries of bucket i's chain, first first.
func (s *Shard[H, T]) ChainLocked(i int) []*Entry[H, T] {
	var es []*Entry[H, T]
	for e := s.buckets[i]; e != nil; e = e.next {
		es = append(es, e)
	}
	return es
}
