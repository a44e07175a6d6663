package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"strings"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal/vfs"
)

// Shared memory (the ivshmem file), all little-endian uint64 words:
//
//	header [0, 4096): magic, phase, crash time, start time, goroutines,
//	  verify status, verify record count, reopen status, message length,
//	  message bytes from 1024
//	ack rings [4096, 32 MiB): one region per goroutine: word 0 is the count of
//	  acks published (stored last, atomically), entries of 4 words
//	  (LSN, seq, time, gid) from byte 64, entry for seq s at s % capacity
//	verify records [32 MiB, 64 MiB): 4 words each (LSN, gid, seq, ok)
const (
	shmSize    = 64 << 20
	shmMagic   = 0x62616c6873617263 // "crashlab"
	hdrMagic   = 0
	hdrPhase   = 8
	hdrCrashNs = 16
	hdrStartNs = 24
	hdrGorout  = 32
	hdrVerify  = 40 // 1 ok, 2 Open failed
	hdrNRecs   = 48
	hdrReopen  = 56 // 1 ok, 2 failed
	hdrMsgLen  = 64
	hdrMsg     = 1024
	hdrMsgMax  = 3072
	ackBase    = 4096
	ackEnd     = 32 << 20
	recBase    = 32 << 20
	recMax     = (shmSize - recBase) / 32
	entryBase  = 64

	phaseWorking = 1
	phaseCrashed = 2
	phaseVerify  = 3

	goroutines = 4
	payloadLen = 64

	// The power-loss mode's ack markers (guest.go's startMarkers), written
	// to the disk beyond the filesystem: markerSlots sectors of markerLen
	// bytes, each magic, marker number, guest time, goroutines, ack counts.
	markerMagic = 0x72656b72616d6c63 // "clmarker"
	markerLen   = 512
	markerSlots = 2048
)

func regionSize(g int) int { return ((ackEnd - ackBase) / g) &^ 63 }

func ringCap(g int) int { return (regionSize(g) - entryBase) / 32 }

var crcTab = crc64.MakeTable(crc64.ECMA)

// payload is gid, seq, guest time, filler, and a CRC-64 of the rest in the last 8 bytes.
func payload(b []byte, gid, seq uint64, now int64) {
	binary.LittleEndian.PutUint64(b[0:], gid)
	binary.LittleEndian.PutUint64(b[8:], seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(now))
	for i := 24; i < len(b)-8; i++ {
		b[i] = byte(gid*31 + seq + uint64(i))
	}
	binary.LittleEndian.PutUint64(b[len(b)-8:], crc64.Checksum(b[:len(b)-8], crcTab))
}

func checkPayload(b []byte) (gid, seq uint64, ok bool) {
	if len(b) != payloadLen {
		return 0, 0, false
	}
	gid = binary.LittleEndian.Uint64(b[0:])
	seq = binary.LittleEndian.Uint64(b[8:])
	return gid, seq, binary.LittleEndian.Uint64(b[len(b)-8:]) == crc64.Checksum(b[:len(b)-8], crcTab)
}

// labPolicy names a policy the lab runs, how the guest builds it, and the
// promise (README's "lost on power loss" column, the bound for an OS crash).
type labPolicy struct {
	Name    string // as the table shows it: the policy, then any variant
	Base    string // the policy's name as given (a lab name or a policy.Parse spec)
	Build   func() policy.Policy
	Promise func(slack time.Duration) Promise
	Method  vfs.SyncMethod // the log's sync method (fdatasync unless a variant)
	SegSize int64          // the log's segment size in bytes
}

// defaultSegSize is the guest log's segment size unless -segment-size says
// otherwise: small enough that a trial's commits cross several rolls.
const defaultSegSize = 4 << 20

// variant returns p run with sync method m and segment size seg, named so
// in the table.
func variant(p labPolicy, m vfs.SyncMethod, seg int64) labPolicy {
	p.Method, p.SegSize = m, seg
	if m != vfs.Fdatasync {
		p.Name += " + " + m.String()
	}
	if seg != defaultSegSize {
		p.Name += fmt.Sprintf(" + %d KiB segments", seg>>10)
	}
	return p
}

const (
	ivl      = 200 * time.Millisecond
	writeDly = 50 * time.Millisecond
	everyN   = 4
)

// labPolicies are the seven families, with intervals short enough that a
// few seconds of commits cross many of them.
var labPolicies = []labPolicy{
	named("SyncEveryCommit", policy.SyncEveryCommit()),
	named(fmt.Sprintf("SyncEveryN(%d)", everyN), policy.SyncEveryN(everyN)),
	named("SyncInterval(200ms)", policy.SyncInterval(ivl)),
	named("SyncIntervalPostponed(200ms,2s)", policy.SyncIntervalPostponed(ivl, 2*time.Second)),
	named("BufferedInterval(200ms,50ms)", policy.BufferedInterval(ivl, writeDly)),
	named("AsyncCommit(100ms,1MiB)", policy.AsyncCommit(100*time.Millisecond, 1<<20)),
	named("SyncNever", policy.SyncNever()),
}

func named(name string, p policy.Policy) labPolicy {
	return labPolicy{Name: name, Base: name, Build: func() policy.Policy { return p },
		Promise: func(s time.Duration) Promise { return promiseOf(p, s) }, SegSize: defaultSegSize}
}

// promiseOf is what p promises to lose in an OS crash (the README's "lost
// on power loss" column): slack stands for the 2·fsync term of the time
// bounds plus the emulator's timer slack.
func promiseOf(p policy.Policy, slack time.Duration) Promise {
	d, w := p.Interval(), p.WriteDelay()
	switch p.Kind() {
	case policy.KindSyncEveryCommit:
		return Promise{Text: "nothing", Nothing: true}
	case policy.KindSyncEveryN:
		// < n groups; a group holds at most one commit per goroutine.
		n := p.N()
		return Promise{Text: fmt.Sprintf("< %d groups (≤ %d commits)", n, (n-1)*goroutines), MaxLost: (n - 1) * goroutines}
	case policy.KindSyncInterval, policy.KindSyncIntervalPostponed:
		return Promise{Text: fmt.Sprintf("≤ d + 2·fsync (%s)", d+slack), MaxAge: d + slack}
	case policy.KindBufferedInterval:
		return Promise{Text: fmt.Sprintf("≤ max(w,d) + 2·fsync (%s)", max(w, d)+slack), MaxAge: max(w, d) + slack}
	case policy.KindAsyncCommit:
		return Promise{Text: fmt.Sprintf("≤ 3·d + fsync (%s)", 3*d+slack), MaxAge: 3*d + slack}
	}
	return Promise{Text: "whatever the OS had not flushed", Unbounded: true}
}

// findPolicy returns the lab policy called name (with or without its
// parameters), or, for any other name, the policy policy.Parse reads from it
// ("innodb=2", "appendfsync=everysec", "sync-every-n=8"), named as given.
func findPolicy(name string) (labPolicy, bool) {
	for _, p := range labPolicies {
		if p.Name == name || shortName(p.Name) == name {
			return p, true
		}
	}
	if p, err := policy.Parse(name); err == nil {
		return named(name, p), true
	}
	return labPolicy{}, false
}

// guestName is how the guest is told the policy on the kernel command line
// (no spaces): the short name of a lab policy, else the spec itself.
func guestName(p labPolicy) string {
	for _, q := range labPolicies {
		if q.Name == p.Base {
			return shortName(p.Base)
		}
	}
	return strings.ReplaceAll(p.Base, " ", "")
}

// shortName is the name without its parameters ("SyncEveryN(4)" → "SyncEveryN").
func shortName(n string) string {
	for i, c := range n {
		if c == '(' {
			return n[:i]
		}
	}
	return n
}

// safeName is name as a file name: the short name, with anything but
// letters, digits, '-' and '_' replaced by '_'.
func safeName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, name)
}
