package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"time"

	"github.com/durawal/durawal/policy"
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
	Name    string
	Build   func() policy.Policy
	Promise func(slack time.Duration) Promise
}

const (
	ivl      = 200 * time.Millisecond
	writeDly = 50 * time.Millisecond
	everyN   = 4
)

var labPolicies = []labPolicy{
	{"SyncEveryCommit", policy.SyncEveryCommit, func(time.Duration) Promise { return Promise{Text: "nothing", Nothing: true} }},
	{fmt.Sprintf("SyncEveryN(%d)", everyN), func() policy.Policy { return policy.SyncEveryN(everyN) }, func(time.Duration) Promise {
		// < n groups; a group holds at most one commit per goroutine.
		return Promise{Text: fmt.Sprintf("< %d groups (≤ %d commits)", everyN, (everyN-1)*goroutines), MaxLost: (everyN - 1) * goroutines}
	}},
	{"SyncInterval(200ms)", func() policy.Policy { return policy.SyncInterval(ivl) }, func(s time.Duration) Promise {
		return Promise{Text: fmt.Sprintf("≤ d + 2·fsync (%s)", ivl+s), MaxAge: ivl + s}
	}},
	{"SyncIntervalPostponed(200ms,2s)", func() policy.Policy { return policy.SyncIntervalPostponed(ivl, 2*time.Second) }, func(s time.Duration) Promise {
		return Promise{Text: fmt.Sprintf("≤ d + 2·fsync (%s)", ivl+s), MaxAge: ivl + s}
	}},
	{"BufferedInterval(200ms,50ms)", func() policy.Policy { return policy.BufferedInterval(ivl, writeDly) }, func(s time.Duration) Promise {
		return Promise{Text: fmt.Sprintf("≤ max(w,d) + 2·fsync (%s)", ivl+s), MaxAge: ivl + s}
	}},
	{"AsyncCommit(100ms,1MiB)", func() policy.Policy { return policy.AsyncCommit(100*time.Millisecond, 1<<20) }, func(s time.Duration) Promise {
		return Promise{Text: fmt.Sprintf("≤ 3·d + fsync (%s)", 300*time.Millisecond+s), MaxAge: 300*time.Millisecond + s}
	}},
	{"SyncNever", policy.SyncNever, func(time.Duration) Promise {
		return Promise{Text: "whatever the OS had not flushed", Unbounded: true}
	}},
}

func findPolicy(name string) (labPolicy, bool) {
	for _, p := range labPolicies {
		if p.Name == name || shortName(p.Name) == name {
			return p, true
		}
	}
	return labPolicy{}, false
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
