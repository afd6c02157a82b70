package fuzz

import (
	"fmt"
	"slices"
	"testing"

	"github.com/holdline/locks/waitq"
)

// FuzzWaitQueue runs the fuzzer's bytes as operations on two waitq.Lists
// sharing eight elements, and on two slices: PushBack (which panics for an
// element already in a list), PopFront, Remove (false for an element of the
// other list or of none), with Len, Front, Next and InList checked after
// every op.
func FuzzWaitQueue(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 2, 1, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := runWaitQueue(data); err != nil {
			t.Fatal(err)
		}
	})
}

const queueElems = 8

func runWaitQueue(data []byte) error {
	var lists [2]waitq.List[int]
	var elems [queueElems]waitq.Element[int]
	for i := range elems {
		elems[i].Value = i
	}
	var model [2][]int
	in := func(e int) int { // which model list holds e, or -1
		for l := range model {
			if slices.Contains(model[l], e) {
				return l
			}
		}
		return -1
	}
	for step := 0; len(data) >= 2 && step < 1024; step++ {
		op, arg := data[0], data[1]
		data = data[2:]
		l, e := int(arg>>7), int(arg)%queueElems
		where := fmt.Sprintf("step %d (op %d, list %d, element %d)", step, op%3, l, e)
		switch op % 3 {
		case 0:
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				lists[l].PushBack(&elems[e])
				return false
			}()
			if want := in(e) >= 0; panicked != want {
				return fmt.Errorf("%s: PushBack panicked=%v, want %v", where, panicked, want)
			}
			if !panicked {
				model[l] = append(model[l], e)
			}
		case 1:
			got := lists[l].PopFront()
			switch {
			case len(model[l]) == 0 && got != nil:
				return fmt.Errorf("%s: PopFront of an empty list gave %d", where, got.Value)
			case len(model[l]) == 0:
			case got == nil || got.Value != model[l][0]:
				return fmt.Errorf("%s: PopFront gave %v, want %d", where, got, model[l][0])
			default:
				model[l] = model[l][1:]
			}
		case 2:
			want := in(e) == l
			if got := lists[l].Remove(&elems[e]); got != want {
				return fmt.Errorf("%s: Remove = %v, want %v", where, got, want)
			}
			if want {
				model[l] = slices.DeleteFunc(model[l], func(x int) bool { return x == e })
			}
		}
		for l := range lists {
			var got []int
			for el := lists[l].Front(); el != nil && len(got) <= queueElems; el = el.Next() {
				got = append(got, el.Value)
			}
			if lists[l].Len() != len(model[l]) || !slices.Equal(got, model[l]) {
				return fmt.Errorf("%s: list %d holds %v (Len %d), want %v", where, l, got, lists[l].Len(), model[l])
			}
		}
		for i := range elems {
			if got, want := elems[i].InList(), in(i) >= 0; got != want {
				return fmt.Errorf("%s: element %d InList() = %v, want %v", where, i, got, want)
			}
			if in(i) < 0 && elems[i].Next() != nil {
				return fmt.Errorf("%s: element %d, in no list, has a Next", where, i)
			}
		}
	}
	return nil
}
