package server

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/holdline/locks"
	pb "github.com/holdline/locks/proto/locksv1"
)

// keepalives is a session stream that brings n keepalives, then ends.
type keepalives struct {
	pb.Locks_SessionServer
	n, seq uint64
}

func (k *keepalives) Recv() (*pb.SessionRequest, error) {
	if k.seq == k.n {
		return nil, io.EOF
	}
	k.seq++
	return &pb.SessionRequest{Msg: &pb.SessionRequest_Keepalive{Keepalive: &pb.Keepalive{Seq: k.seq}}}, nil
}

// TestKeepalivesAnsweredByTheLast: keepalives that come while nothing is
// sent are answered once, for the last of them, so that a client that
// sends and never reads makes the server keep one answer, not one per
// keepalive.
func TestKeepalivesAnsweredByTheLast(t *testing.T) {
	store := locks.NewStore()
	defer store.Close()
	srv, err := New(store)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := srv.newSession(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.close()
	a, err := sess.attach(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sess.receive(&keepalives{n: 1000}, a) // returns at the stream's end
	evs, _, _ := sess.outbox(a)
	if len(evs) != 1 || evs[0].GetKeepaliveAck().GetSeq() != 1000 {
		t.Fatalf("answers %v, want one, to keepalive 1000", evs)
	}
}
