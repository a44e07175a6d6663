// Package etcdraft stores the state of an etcd raft node on durawal.
package etcdraft
