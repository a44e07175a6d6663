module github.com/durawal/durawal/etcdraft

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/durawal/durawal v0.2.0
	github.com/stretchr/testify v1.12.1
	go.etcd.io/raft/v3 v3.7.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.50.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

