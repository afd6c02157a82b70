// Package locksv1 is the generated Go code of holdline.locks.v1, the wire
// of a locks server (proto/holdline/locks/v1/locks.proto): its messages
// and the gRPC client and server of the Locks service. Packages server
// and client speak it; use them rather than this package.
//
// Regenerate with `go generate ./...` from the module's root: buf and the
// protoc-gen-go and protoc-gen-go-grpc plugins run at pinned versions
// through `go run`.
package locksv1

//go:generate go run github.com/bufbuild/buf/cmd/buf@v1.75.0 generate .. --template ../buf.gen.yaml --output ..
