package main

import (
	"errors"
	"fmt"
)

// mode is the durability a commit waits for.
type mode int

const (
	// durable: the record is on stable storage before Append returns.
	durable mode = iota
	// relaxed: the library's no-sync setting; Append returns after a write
	// to the OS or into the library's buffer.
	relaxed
)

func (m mode) String() string {
	if m == durable {
		return "durable"
	}
	return "relaxed"
}

// errNoMode is returned by open for a mode the library does not offer.
var errNoMode = errors.New("mode not offered by this library")

// peerLog is one open log under test. Append must be safe for concurrent
// use: adapters add an outer mutex where the library needs one, and say so
// in lib.concurrency.
type peerLog interface {
	// Append commits rec and returns once mode's guarantee holds.
	Append(rec []byte) error
	// Syncs returns the fsync/fdatasync calls on the log's files counted by
	// the library's own counter or FS seam since open, or -1 without one.
	Syncs() int64
	// Close closes the log, making everything appended durable.
	Close() error
}

// lib describes one WAL library and how it is driven.
type lib struct {
	name    string // short name used in tables and flags
	version string // module@version
	// concurrency says how concurrent commits are handled.
	concurrency string
	// relaxed says which setting the relaxed mode uses, or "" if none.
	relaxed string
	// counter names where Syncs comes from, or "" (strace only).
	counter string
	// open opens (creating if needed) a log in dir.
	open func(dir string, m mode) (peerLog, error)
	// fill writes n copies of rec as fast as the library allows (its batch
	// API, no per-record sync) and closes the log durably.
	fill func(dir string, n int, rec []byte) error
	// replay opens the log in dir as the library's recovery does and
	// returns the records it yields, calling visit for each.
	replay func(dir string, visit func(rec []byte)) (int, error)
}

// libs returns every peer in the order they are run, durawal first.
func libs() []*lib {
	return []*lib{durawalLib(), pebbleLib(), etcdLib(), tidwallLib(), raftwalLib(), rosedbLib()}
}

// pick returns the libraries named in csv ("all" for every one).
func pick(csv string) ([]*lib, error) {
	all := libs()
	if csv == "" || csv == "all" {
		return all, nil
	}
	var out []*lib
	for _, name := range splitComma(csv) {
		found := false
		for _, l := range all {
			if l.name == name {
				out = append(out, l)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown library %q", name)
		}
	}
	return out, nil
}
