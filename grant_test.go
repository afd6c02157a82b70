package locks

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/holdline/locks/shard"
)

// TestSessionGrantReadsTheClockUnderTheLock checks that a session's grant
// of a free key, whose ttl counts from the grant (SPEC §3), takes its
// instant under the shard's lock, not at the call: a grant made after the
// shard's mutex was let go at unlocked has Granted no earlier than that.
// The call is given 20 ms to reach the mutex; one that comes later finds it
// free, and the check then holds whatever the code does.
func TestSessionGrantReadsTheClockUnderTheLock(t *testing.T) {
	st := NewStore()
	defer st.Close()
	l, err := OpenLock(st, "invoices", TTL(time.Minute))
	require.NoError(t, err)
	sess := st.NewSession()
	defer sess.Close()
	s := l.store
	_, sh := s.shardOf(shard.Hash(l.state.hash, "k"))

	sh.Lock()
	granted := make(chan *Grant, 1)
	go func() {
		g, err := l.Acquire(context.Background(), sess, "k")
		assert.NoError(t, err)
		granted <- g
	}()
	time.Sleep(20 * time.Millisecond)
	unlocked := time.Now()
	sh.Unlock()
	g := <-granted
	require.NotNil(t, g)
	defer g.Release()
	assert.False(t, g.Lease().Granted.Before(unlocked),
		"Granted %v, before the shard's lock was let go at %v", g.Lease().Granted, unlocked)
}
