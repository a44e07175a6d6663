package policy

import "time"

// InnoDB returns the policy matching innodb_flush_log_at_trx_commit=level
// with innodb_flush_log_at_timeout=1s: 1 is [SyncEveryCommit], 2 is
// [SyncInterval](1s), 0 is [BufferedInterval](1s, 1s) (the 5.7 behaviour: the
// log buffer is written and synced once a second). Any other level is an
// error matching [ErrInvalid], never a default.
func InnoDB(level int) (Policy, error) {
	switch level {
	case 1:
		return SyncEveryCommit(), nil
	case 2:
		return SyncInterval(time.Second), nil
	case 0:
		return BufferedInterval(time.Second, time.Second), nil
	}
	return Policy{}, invalid("innodb_flush_log_at_trx_commit=%d, want 0, 1 or 2", level)
}

// AppendFsync returns the policy matching Redis's appendfsync word:
// "always" is [SyncEveryCommit], "everysec" is [SyncIntervalPostponed](1s,
// 2s), "no" is [SyncNever]. Any other word is an error matching
// [ErrInvalid].
func AppendFsync(word string) (Policy, error) {
	switch word {
	case "always":
		return SyncEveryCommit(), nil
	case "everysec":
		return SyncIntervalPostponed(time.Second, 2*time.Second), nil
	case "no":
		return SyncNever(), nil
	}
	return Policy{}, invalid("appendfsync %q, want always, everysec or no", clip(word))
}

// SyncBinlog returns the policy matching MySQL's sync_binlog=n: 0 is
// [SyncNever], 1 is [SyncEveryCommit], n > 1 is [SyncEveryN](n). A negative n
// is an error matching [ErrInvalid].
func SyncBinlog(n int) (Policy, error) {
	switch {
	case n < 0:
		return Policy{}, invalid("sync_binlog=%d, want ≥ 0", n)
	case n == 0:
		return SyncNever(), nil
	case n == 1:
		return SyncEveryCommit(), nil
	}
	return SyncEveryN(n), nil
}

// PostgresAsync returns the policy matching synchronous_commit=off with
// PostgreSQL's defaults wal_writer_delay=200ms and
// wal_writer_flush_after=1MB: [AsyncCommit](200ms, 1 MiB).
func PostgresAsync() Policy { return AsyncCommit(200*time.Millisecond, 1<<20) }
