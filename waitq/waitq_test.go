package waitq_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/holdline/locks/waitq"
)

type waiter struct {
	id   int
	link waitq.Element[*waiter]
}

func newWaiter(id int) *waiter {
	w := &waiter{id: id}
	w.link.Value = w
	return w
}

// ids returns the ids of l's elements, front to back, following Next.
func ids(l *waitq.List[*waiter]) []int {
	var out []int
	for e := l.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.id)
	}
	return out
}

func TestZeroListIsEmpty(t *testing.T) {
	var l waitq.List[*waiter]
	assert.Equal(t, 0, l.Len())
	assert.Nil(t, l.Front())
	assert.Nil(t, l.PopFront())
	assert.False(t, l.Remove(&newWaiter(1).link))
}

func TestFIFO(t *testing.T) {
	var l waitq.List[*waiter]
	for i := 1; i <= 5; i++ {
		l.PushBack(&newWaiter(i).link)
	}
	require.Equal(t, []int{1, 2, 3, 4, 5}, ids(&l))
	for i := 1; i <= 5; i++ {
		e := l.PopFront()
		require.NotNil(t, e)
		assert.Equal(t, i, e.Value.id)
		assert.False(t, e.InList(), "a popped element is in no list")
		assert.Nil(t, e.Next())
	}
	assert.Equal(t, 0, l.Len())
}

func TestRemoveFromEveryPlace(t *testing.T) {
	for at := 0; at < 4; at++ {
		var l waitq.List[*waiter]
		ws := make([]*waiter, 4)
		for i := range ws {
			ws[i] = newWaiter(i)
			l.PushBack(&ws[i].link)
		}
		require.True(t, l.Remove(&ws[at].link))
		assert.False(t, ws[at].link.InList())
		assert.Equal(t, 3, l.Len())
		var want []int
		for i := range ws {
			if i != at {
				want = append(want, i)
			}
		}
		assert.Equal(t, want, ids(&l), "removing index %d", at)
		assert.False(t, l.Remove(&ws[at].link), "a second Remove is a no-op")
		assert.Equal(t, 3, l.Len())
	}
}

func TestTwoAdjacentRemovedLeaveNoGhost(t *testing.T) {
	var l waitq.List[*waiter]
	ws := []*waiter{newWaiter(0), newWaiter(1), newWaiter(2), newWaiter(3)}
	for _, w := range ws {
		l.PushBack(&w.link)
	}
	l.Remove(&ws[1].link)
	l.Remove(&ws[2].link)
	assert.Equal(t, []int{0, 3}, ids(&l))
	assert.Equal(t, 0, l.PopFront().Value.id)
	assert.Equal(t, 3, l.PopFront().Value.id)
	assert.Nil(t, l.PopFront())
}

func TestRemoveFromAnotherList(t *testing.T) {
	var a, b waitq.List[*waiter]
	w := newWaiter(1)
	a.PushBack(&w.link)
	assert.False(t, b.Remove(&w.link))
	assert.Equal(t, 1, a.Len())
	assert.Equal(t, 0, b.Len())
}

func TestPushBackTwicePanics(t *testing.T) {
	var a, b waitq.List[*waiter]
	w := newWaiter(1)
	a.PushBack(&w.link)
	assert.Panics(t, func() { b.PushBack(&w.link) })
	assert.Equal(t, 1, a.Len())
	assert.Equal(t, 0, b.Len())
}

func TestReuseAfterRemoval(t *testing.T) {
	var a, b waitq.List[*waiter]
	w := newWaiter(7)
	a.PushBack(&w.link)
	a.Remove(&w.link)
	b.PushBack(&w.link)
	assert.Equal(t, []int{7}, ids(&b))
	assert.Equal(t, 0, a.Len())
}

// TestModel drives a List and a slice with the same random operations.
func TestModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var l waitq.List[*waiter]
	var model []*waiter
	next := 0
	for step := 0; step < 20000; step++ {
		switch op := r.IntN(4); {
		case op <= 1 || len(model) == 0: // push more than pop, so the line grows

			w := newWaiter(next)
			next++
			l.PushBack(&w.link)
			model = append(model, w)
		case op == 2:
			e := l.PopFront()
			require.Equal(t, model[0], e.Value)
			model = model[1:]
		default:
			i := r.IntN(len(model))
			require.True(t, l.Remove(&model[i].link))
			model = append(model[:i], model[i+1:]...)
		}
		require.Equal(t, len(model), l.Len())
		if step%1000 == 0 {
			require.Equal(t, modelIDs(model), ids(&l))
		}
	}
	require.NotEmpty(t, model)
	require.Equal(t, modelIDs(model), ids(&l))
}

func modelIDs(model []*waiter) []int {
	var want []int
	for _, w := range model {
		want = append(want, w.id)
	}
	return want
}

func TestNoAllocations(t *testing.T) {
	var l waitq.List[*waiter]
	a, b := newWaiter(1), newWaiter(2)
	allocs := testing.AllocsPerRun(1000, func() {
		l.PushBack(&a.link)
		l.PushBack(&b.link)
		l.Remove(&a.link)
		l.PopFront()
	})
	assert.Equal(t, 0.0, allocs)
}

func BenchmarkPushPop(b *testing.B) {
	var l waitq.List[*waiter]
	w := newWaiter(1)
	for b.Loop() {
		l.PushBack(&w.link)
		l.PopFront()
	}
}
