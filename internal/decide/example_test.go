package decide_test

import (
	"fmt"
	"time"

	"github.com/durawal/durawal/internal/decide"
	"github.com/durawal/durawal/policy"
)

func Example_syncEveryCommit() {
	p := policy.SyncEveryCommit()
	fmt.Println(p, decide.Commit(p, decide.State{}), decide.SyncGroup(p, decide.State{}))
	// Output: sync-every-commit sync true
}

func Example_syncEveryN() {
	p := policy.SyncEveryN(3) // sync_binlog=3: every third group syncs
	for g := range 4 {
		fmt.Println("group", g+1, "syncs:", decide.SyncGroup(p, decide.State{GroupsSinceSync: g % 3}))
	}
	// Output:
	// group 1 syncs: false
	// group 2 syncs: false
	// group 3 syncs: true
	// group 4 syncs: false
}

func Example_syncInterval() {
	p := policy.SyncInterval(time.Second) // innodb_flush_log_at_trx_commit=2
	unsynced := decide.State{AppendedLSN: 100, WrittenLSN: 100, SyncedLSN: 40}
	unsynced.SinceSyncStart = 900 * time.Millisecond
	fmt.Println(decide.Commit(p, unsynced), decide.OnTick(p, unsynced).Sync)
	unsynced.SinceSyncStart = time.Second
	fmt.Println(decide.OnTick(p, unsynced).Sync)
	// Output:
	// write false
	// true
}

func Example_syncIntervalPostponed() {
	p := policy.SyncIntervalPostponed(time.Second, 2*time.Second) // appendfsync everysec
	s := decide.State{SyncInProgress: true, PostponedFor: time.Second}
	fmt.Println(decide.Commit(p, s)) // postponed: acknowledged from the buffer
	s.PostponedFor = 2 * time.Second
	fmt.Println(decide.Commit(p, s)) // forced: a delayed fsync
	// Output:
	// none
	// write
}

func Example_bufferedInterval() {
	p := policy.BufferedInterval(time.Second, time.Second) // innodb_flush_log_at_trx_commit=0
	s := decide.State{AppendedLSN: 100, WrittenLSN: 0, SyncedLSN: 0, SinceSyncStart: time.Second}
	fmt.Println(decide.Commit(p, s), decide.Tick(p), decide.OnTick(p, s))
	// Output: none 1s {true true}
}

func Example_asyncCommit() {
	p := policy.AsyncCommit(200*time.Millisecond, 1<<20) // synchronous_commit=off
	s := decide.State{AppendedLSN: 2 << 20, WrittenLSN: 0, SyncedLSN: 0, SinceSyncStart: 10 * time.Millisecond}
	fmt.Println(decide.Commit(p, s), decide.OnTick(p, s)) // 2 MiB unsynced: sync before the delay
	// Output: none {true true}
}

func Example_syncNever() {
	p := policy.SyncNever() // appendfsync no, sync_binlog=0
	fmt.Println(decide.Commit(p, decide.State{}), decide.Tick(p), decide.OnTick(p, decide.State{AppendedLSN: 9}))
	// Output: write 0s {false false}
}
