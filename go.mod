module github.com/holdline/locks

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/puzpuzpuz/xsync/v4 v4.5.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/moby/locker v1.0.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.25.0 // indirect
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab // indirect
)
