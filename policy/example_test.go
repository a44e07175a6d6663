package policy_test

import (
	"fmt"

	"github.com/durawal/durawal/policy"
)

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
