module github.com/holdline/locks

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/moby/locker v1.0.1
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.25.0
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
