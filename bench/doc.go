// Package bench holds the go test benchmarks of durawal on a real disk: the
// workloads of the four articles the project reproduces (000:
// innodb_flush_log_at_trx_commit and P99 on NVMe, MySQL 8.0.35; 001: Redis
// appendfsync always/everysec/no, Redis 8; 002: the MySQL "fsync cliff"
// under concurrent commits; 004: counting InnoDB redo fsyncs, MySQL 8.4), as
// key=value sub-benchmarks that benchstat reads directly. The experiment
// runner that prints the articles' tables is bench/cmd/walbench; this
// package is for comparing two builds or two disks.
//
// # Running
//
//	go test ./bench -run '^$' -bench . -count 10 > new.txt
//	benchstat old.txt new.txt
//
// (go test ./bench -bench . -count 10 | benchstat /dev/stdin reads it in one
// go.) The logs live in a fresh directory under TMPDIR (b.TempDir), or under
// -dir, which must then be on the disk to measure:
//
//	go test ./bench -run '^$' -bench . -count 10 -args -dir /path/on/disk > new.txt
//
// The whole suite with -count 10 takes about a quarter of an hour (the
// delay-500us-10 rows alone wait ~11 ms a commit with one committer); narrow
// it with -bench, e.g. -bench 'Commit/policy=innodb-1/'.
//
// Warning: on tmpfs and overlayfs (the default TMPDIR in many containers),
// fsync is nearly free, and every durable commit looks as cheap as a write.
// The benchmarks log a line when they see one of those filesystems.
//
// # Benchmarks
//
//	BenchmarkDisk/op=write+fdatasync/size=100       the disk alone: the baseline
//	BenchmarkCommit/policy=innodb-1/committers=8/size=100
//	                                                commits under a policy (innodb-0/1/2,
//	                                                appendfsync-always/everysec/no),
//	                                                shared by 1..32 committers
//	BenchmarkGroupCommit/group=delay-500us-10/committers=16/size=100
//	                                                level 1 with the adaptive merge wait
//	                                                (adaptive), without it (plain), or with
//	                                                a 500 µs / 10-commit sync-stage delay
//	BenchmarkBatch/policy=appendfsync-always/batch=2000/size=100
//	                                                AppendBatch, one wait per batch
//
// One op is one commit (one batch for BenchmarkBatch), shared among the
// committers. Besides ns/op and MB/s (record payload bytes), each reports
// fsyncs/op and commits/fsync from wal.Stats, and p50-ns and p99-ns of the
// commit latency each committer saw. Disks drift: compare runs made close
// together, with -count 10, and quote ratios rather than absolute figures.
package bench
