package locksv1

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/holdline/locks"
)

// FromError returns e's fields as an Error of the wire. A cause travels
// as its text.
func FromError(e *locks.Error) *Error {
	w := &Error{
		Kind:        Kind(e.Kind),
		Lock:        []byte(e.Lock),
		Key:         []byte(e.Key),
		Reason:      []byte(e.Reason),
		HeldForNs:   int64(e.HeldFor),
		HolderFence: e.HolderFence,
	}
	if e.Cause != nil {
		w.Cause = []byte(e.Cause.Error())
	}
	return w
}

// LocksError rebuilds the *locks.Error that w describes, so that its
// message is the one the server's store made and errors.Is matches its
// kind's sentinel. A cause comes back as an error of the same text; the
// texts of context.Canceled and context.DeadlineExceeded come back as
// those errors, so that errors.Is matches them too.
func (w *Error) LocksError() *locks.Error {
	e := &locks.Error{
		Kind:        locks.Kind(w.GetKind()),
		Lock:        string(w.GetLock()),
		Key:         string(w.GetKey()),
		Reason:      string(w.GetReason()),
		HeldFor:     time.Duration(w.GetHeldForNs()),
		HolderFence: w.GetHolderFence(),
	}
	if c := w.GetCause(); len(c) > 0 {
		e.Cause = causeOf(string(c))
	}
	return e
}

func causeOf(text string) error {
	switch text {
	case context.Canceled.Error():
		return context.Canceled
	case context.DeadlineExceeded.Error():
		return context.DeadlineExceeded
	}
	return errors.New(text)
}

// Code returns the gRPC code a failed call answers for an error of kind
// k: InvalidArgument for Invalid, Aborted for InUse and Lost,
// ResourceExhausted for Limit, FailedPrecondition for Closed, Canceled
// for Canceled.
func Code(k locks.Kind) codes.Code {
	switch k {
	case locks.Invalid:
		return codes.InvalidArgument
	case locks.InUse, locks.Lost:
		return codes.Aborted
	case locks.Limit:
		return codes.ResourceExhausted
	case locks.Closed:
		return codes.FailedPrecondition
	case locks.Canceled:
		return codes.Canceled
	}
	return codes.Unknown
}

// Status returns the status of a call that failed with e: code c, e's
// message (made valid UTF-8) and e's fields in its details.
func Status(c codes.Code, e *locks.Error) *status.Status {
	st := status.New(c, strings.ToValidUTF8(e.Error(), "\uFFFD"))
	if d, err := st.WithDetails(FromError(e)); err == nil {
		return d
	}
	return st
}

// ErrorOf returns the *locks.Error that a failed call's error carries in
// its status details, or nil when it carries none (a call that failed in
// the transport, or for want of a token).
func ErrorOf(err error) *locks.Error {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return nil
	}
	for _, d := range st.Details() {
		if w, ok := d.(*Error); ok {
			return w.LocksError()
		}
	}
	return nil
}
