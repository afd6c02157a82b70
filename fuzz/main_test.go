package fuzz

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a
// store's timer goroutine, a waiter, a holder's function.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
