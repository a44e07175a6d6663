package policy_test

import (
	"fmt"
	"time"

	"github.com/durawal/durawal/policy"
)

func ExampleSyncEveryCommit() {
	p := policy.SyncEveryCommit()
	fmt.Println(p, p.Commit(policy.State{}), p.SyncGroup(policy.State{}))
	// Output: sync-every-commit sync true
}

func ExampleSyncEveryN() {
	p := policy.SyncEveryN(3) // sync_binlog=3: every third group syncs
	for g := range 4 {
		fmt.Println("group", g+1, "syncs:", p.SyncGroup(policy.State{GroupsSinceSync: g % 3}))
	}
	// Output:
	// group 1 syncs: false
	// group 2 syncs: false
	// group 3 syncs: true
	// group 4 syncs: false
}

func ExampleSyncInterval() {
	p := policy.SyncInterval(time.Second) // innodb_flush_log_at_trx_commit=2
	unsynced := policy.State{AppendedLSN: 100, WrittenLSN: 100, SyncedLSN: 40}
	unsynced.SinceSyncStart = 900 * time.Millisecond
	fmt.Println(p.Commit(unsynced), p.OnTick(unsynced).Sync)
	unsynced.SinceSyncStart = time.Second
	fmt.Println(p.OnTick(unsynced).Sync)
	// Output:
	// write false
	// true
}

func ExampleSyncIntervalPostponed() {
	p := policy.SyncIntervalPostponed(time.Second, 2*time.Second) // appendfsync everysec
	s := policy.State{SyncInProgress: true, PostponedFor: time.Second}
	fmt.Println(p.Commit(s)) // postponed: acknowledged from the buffer
	s.PostponedFor = 2 * time.Second
	fmt.Println(p.Commit(s)) // forced: a delayed fsync
	// Output:
	// none
	// write
}

func ExampleBufferedInterval() {
	p := policy.BufferedInterval(time.Second, time.Second) // innodb_flush_log_at_trx_commit=0
	s := policy.State{AppendedLSN: 100, WrittenLSN: 0, SyncedLSN: 0, SinceSyncStart: time.Second}
	fmt.Println(p.Commit(s), p.Tick(), p.OnTick(s))
	// Output: none 1s {true true}
}

func ExampleAsyncCommit() {
	p := policy.AsyncCommit(200*time.Millisecond, 1<<20) // synchronous_commit=off
	s := policy.State{AppendedLSN: 2 << 20, WrittenLSN: 0, SyncedLSN: 0, SinceSyncStart: 10 * time.Millisecond}
	fmt.Println(p.Commit(s), p.OnTick(s)) // 2 MiB unsynced: sync before the delay
	// Output: none {true true}
}

func ExampleSyncNever() {
	p := policy.SyncNever() // appendfsync no, sync_binlog=0
	fmt.Println(p.Commit(policy.State{}), p.Tick(), p.OnTick(policy.State{AppendedLSN: 9}))
	// Output: write 0s {false false}
}

func ExampleInnoDB() {
	for _, level := range []int{0, 1, 2, 3} {
		p, err := policy.InnoDB(level)
		fmt.Println(level, p, err)
	}
	// Output:
	// 0 buffered-interval(1s,1s) <nil>
	// 1 sync-every-commit <nil>
	// 2 sync-interval(1s) <nil>
	// 3 sync-every-commit policy: invalid policy: innodb_flush_log_at_trx_commit=3, want 0, 1 or 2
}

func ExampleAppendFsync() {
	for _, word := range []string{"always", "everysec", "no", "sometimes"} {
		p, err := policy.AppendFsync(word)
		if err != nil {
			fmt.Println(word, "->", err)
			continue
		}
		fmt.Println(word, "->", p)
	}
	// Output:
	// always -> sync-every-commit
	// everysec -> sync-interval-postponed(1s,2s)
	// no -> sync-never
	// sometimes -> policy: invalid policy: appendfsync "sometimes", want always, everysec or no
}

func ExampleSyncBinlog() {
	for _, n := range []int{0, 1, 100} {
		p, _ := policy.SyncBinlog(n)
		fmt.Println(n, p)
	}
	// Output:
	// 0 sync-never
	// 1 sync-every-commit
	// 100 sync-every-n(100)
}

func ExamplePostgresAsync() {
	fmt.Println(policy.PostgresAsync())
	// Output: async-commit(200ms,1MiB)
}
