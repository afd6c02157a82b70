// Package waitq is an intrusive FIFO line of waiters: the links live in the
// waiter itself, so joining and leaving the line allocate nothing, and a
// waiter that gives up (its wait timed out, its context ended) leaves from
// the middle of the line in O(1).
//
// The shape is that of container/list and of the Go runtime's channel
// waitq (runtime/chan.go): a doubly linked list with its front and back in
// the List, without container/list's sentinel, and every Element keeps a
// back-pointer to the List it is in, so Remove can tell a member from a
// stranger and a double removal is harmless. Joining the back writes only
// the last waiter besides the newcomer, and leaving the front only the
// second: a ring through the front (a List of two words instead of three)
// also wrote the front on every join and the back on every leave, each the
// record of another goroutine, and cost a hot key's hold about 1 % more
// at GOMAXPROCS 1 and 1-2 % at 2 (go run ./bench -run hotkey, 14
// alternated runs).
//
// A List is a plain data structure and is not safe for concurrent use: its
// owner guards it with its own mutex (the store: a key's line with its
// shard's, a session's ttl group with the session's).
package waitq

// Element is one waiter's place in a List. Embed it in the waiter (setting
// Value to the waiter, to find the way back) so that standing in line costs
// no allocation. Its zero value is not in any list. An Element must not be
// copied while it is in a list.
type Element[T any] struct {
	next, prev *Element[T]
	list       *List[T] // nil when not in a list
	Value      T
}

// InList reports whether e stands in some list.
func (e *Element[T]) InList() bool { return e.list != nil }

// Next returns the element behind e in its list, or nil if e is last or not
// in a list.
func (e *Element[T]) Next() *Element[T] {
	if e.list == nil {
		return nil
	}
	return e.next
}

// List is a FIFO line of Elements. The zero value is an empty list ready to
// use. Not safe for concurrent use.
type List[T any] struct {
	head, tail *Element[T] // the front and the back; nil when empty
	len        int
}

// Len returns the number of elements in l. O(1).
func (l *List[T]) Len() int { return l.len }

// Front returns the first element of l (the longest waiting), or nil if l
// is empty. O(1).
func (l *List[T]) Front() *Element[T] { return l.head }

// PushBack puts e at the back of l. O(1), no allocation. It panics if e is
// already in a list: a waiter stands in one line at a time.
func (l *List[T]) PushBack(e *Element[T]) {
	if e.list != nil {
		panic("waitq: PushBack of an element already in a list")
	}
	e.next, e.prev = nil, l.tail
	if l.tail == nil {
		l.head = e
	} else {
		l.tail.next = e
	}
	l.tail = e
	e.list = l
	l.len++
}

// PopFront removes and returns the first element of l, or nil if l is
// empty. O(1).
func (l *List[T]) PopFront() *Element[T] {
	e := l.head
	if e != nil {
		l.unlink(e)
	}
	return e
}

// Remove takes e out of l wherever it stands and reports whether it was in
// l. An element of another list, or of none, is left alone. O(1).
func (l *List[T]) Remove(e *Element[T]) bool {
	if e.list != l {
		return false
	}
	l.unlink(e)
	return true
}

// unlink removes e from l and clears its links, so a stale pointer through
// e cannot reach the list again.
func (l *List[T]) unlink(e *Element[T]) {
	if e.prev == nil {
		l.head = e.next
	} else {
		e.prev.next = e.next
	}
	if e.next == nil {
		l.tail = e.prev
	} else {
		e.next.prev = e.prev
	}
	e.next, e.prev, e.list = nil, nil, nil
	l.len--
}
